"""An inference server as a source: HTTP (:mod:`.http`, :mod:`.props`, :mod:`.source`), its
page read per rank (:mod:`.reading`, :mod:`.histread`), derived over a window (:mod:`.metrics`,
:mod:`.window`, :mod:`.quantile`, :mod:`.breakdown`, :mod:`.pool`); each kind (vLLM, SGLang,
llama.cpp) declared in :mod:`.kinds`."""
