"""The contents manager ``dfa lab`` gives JupyterLab: Jupyter's default one, that hands a released lab out with
the kernelspec and language_info its kernel will report, so an unedited lab opens unmodified (common.cli.lab
says why). It writes nothing: saving is Jupyter's own.
"""

from __future__ import annotations

import asyncio

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

from common.cli.lab import LAB_KEY, kernel_metadata, with_kernel_metadata


class LabContentsManager(AsyncLargeFileManager):
    """``get`` as Jupyter's, then a released lab's metadata as its kernel will report it (labopen)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._kernels: dict[str, dict | None] = {}  # kernel name -> labopen.kernel_metadata, asked once

    async def _kernel(self, name: str) -> dict | None:
        if name not in self._kernels:
            specs = getattr(self.parent, "kernel_spec_manager", None)
            self._kernels[name] = await asyncio.to_thread(kernel_metadata, name, specs)
            if self._kernels[name] is None:
                self.log.warning("dfa lab: kernel %r is not an ipykernel this server can ask; labs open as saved", name)
        return self._kernels[name]

    async def get(self, path, *args, **kwargs):
        model = await super().get(path, *args, **kwargs)
        content = model.get("content")
        if model.get("type") == "notebook" and isinstance(content, dict):
            metadata = content.get("metadata") or {}
            name = (metadata.get("kernelspec") or {}).get("name")
            if LAB_KEY in metadata and isinstance(name, str) and name:  # a lab: ask its kernel (once)
                with_kernel_metadata(content, await self._kernel(name))
        return model
