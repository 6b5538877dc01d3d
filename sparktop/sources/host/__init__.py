"""A node's host files (PSI, ``/proc/uptime``, RDMA ports, ``spark_hwmon``): parsed
(:mod:`.files`), read on this machine (:mod:`.read`), the probe's slow tier (:mod:`.tier`) and
RDMA rates between readings (:mod:`.fabric_rates`)."""
