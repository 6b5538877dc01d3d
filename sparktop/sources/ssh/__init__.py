"""A node over SSH: the source (:mod:`.source`), the streaming probe (:mod:`.stream`), bounded
remote output (:mod:`.remote`), host-key checks (:mod:`.hostkeys`) and settings (:mod:`.util`)."""
