"""The Textual UI on top of the Textual-free core: app, widgets, screens, themes, palette."""
