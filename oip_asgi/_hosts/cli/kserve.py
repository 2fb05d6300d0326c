"""KServe with no code: what the storage initializer put at ``/mnt/models``, served as a model repository.

KServe copies an InferenceService's ``storageUri`` into ``/mnt/models``: a Triton-style repository
(model folders), one model's folder (``config.pbtxt``, version folders), or bare model files (a
``model.skops`` or ``model.onnx``, as KServe's own runtimes take them). The last two are served
under the InferenceService's name, as KServe's clients address them; so this lays them out as a
repository of one model, of links into ``/mnt/models``, and the serve command serves that::

    oip-asgi serve --model-repository /mnt/models --kserve-name NAME [--trust-pickles] [OPTIONS...]
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..._declarations.repository._paths import is_model_name
from ..._declarations.triton import is_integer_version


def scratch_folder() -> Path:
    """Where the repository of links goes: under /tmp (or $TMPDIR), since KServe's pods may have a read-only root."""
    return Path(tempfile.gettempdir(), "oip-asgi-repository")


def storage_repository(mounted: Path, name: str, scratch: Path, *, trusted: bool = False) -> Path:
    """The repository to serve for what KServe put at `mounted`, for the InferenceService `name`.

    `trusted` lets bare joblib or pickle files load (a config of the repository's own says so itself).
    """
    if not mounted.is_dir():
        raise ValueError(f"{mounted} is not a directory: KServe's storage initializer puts a model's files there")
    if not is_model_name(name):
        raise ValueError(f"{name!r} cannot name a model")
    entries = [entry for entry in sorted(mounted.iterdir()) if not entry.name.startswith(".")]
    if any(entry.is_dir() and _is_model_folder(entry) for entry in entries):
        return mounted
    if not entries:
        raise ValueError(f"{mounted} is empty: the InferenceService's storageUri holds no model")
    model = scratch / name
    model.mkdir(parents=True, exist_ok=True)
    if _is_model_folder(mounted):
        for entry in entries:  # the model's own folder, entry by entry (a link for the folder would leave scratch)
            _link(model / entry.name, entry)
    else:
        _link(model / "1", mounted)  # bare model files: version 1
        if trusted:
            (model / "config.pbtxt").write_text('parameters { key: "trusted" value: { string_value: "true" } }\n')
    return scratch


def _is_model_folder(folder: Path) -> bool:
    return (folder / "config.pbtxt").is_file() or any(
        entry.is_dir() and is_integer_version(entry.name) for entry in folder.iterdir()
    )


def _link(link: Path, target: Path) -> None:
    if link.is_symlink():
        link.unlink()  # a restarted container lays it out again
    link.symlink_to(target.resolve(), target_is_directory=target.is_dir())
