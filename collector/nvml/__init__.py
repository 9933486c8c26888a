"""GPU metrics read straight from NVML (``pynvml`` from the nvidia-ml-py package).

:class:`NvmlGpuSource` is a :class:`~collector.source.Source` for the local GPUs;
:func:`render_dcgm` re-renders its samples under dcgm-exporter's names and units so NVIDIA's
Grafana dashboard works unchanged.
"""

from collector.nvml.dcgm_names import render_dcgm
from collector.nvml.source import NvmlGpuSource

__all__ = ["NvmlGpuSource", "render_dcgm"]
