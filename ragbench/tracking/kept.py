"""A job's record that its run could not store (the server went away, the process was killed) is stored by
the next sweep or job on that machine that closes the run.

Every job's run is tagged ``ragbench.record_folder = host:/path/to/record`` when it opens (``open_run``).
The record's files stay in that folder until the artifact store holds them (``mlflow_sink.log_files``). A
later process on the same host first uploads what the folder kept, through the same path (the files, then
the ``stored.json`` pointer), and tags the run ``ragbench.record_kept``: one that closes the run as stale
(its owner gone: ``MlflowTracker.close_stale_runs`` and ``finished_runs_of``), or that looks for a finished
run of the same job and finds this one ended FAILED or KILLED (``finished_runs_of``: an upload the artifact
proxy refused). The job itself runs again where the sweep resumes: such a run is never reused.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbench.errors import RagbenchError
from ragbench.record import RUN_FILE, STORED_FILE
from ragbench.tracking.mlflow_sink import FOLDER_TAG, log_files

if TYPE_CHECKING:
    from ragbench.tracking.mlflow_tracker import MlflowTracker

log = logging.getLogger(__name__)
KEPT_TAG = "ragbench.record_kept"


def kept_folder(run: Any) -> Path | None:
    """The record folder of ``run`` on this host when it still holds an unstored record, else None."""
    host, _, path = str(run.data.tags.get(FOLDER_TAG) or "").partition(":")
    if host != socket.gethostname() or not path:
        return None
    folder = Path(path)
    return folder if (folder / RUN_FILE).is_file() and not (folder / STORED_FILE).exists() else None


def store_kept(tracker: MlflowTracker, run: Any) -> bool:
    """Uploads the record ``run``'s folder kept (``kept_folder``); False when there is none or the store still
    refuses it (the folder's copy stays, said in one line)."""
    folder = kept_folder(run)
    if folder is None:
        return False
    run_id = str(run.info.run_id)
    try:
        log_files(tracker, run_id, folder)
        tracker.set_tags(run_id, {KEPT_TAG: "true"})
    except (RagbenchError, OSError) as exc:
        log.warning("the record of run %s kept in %s is still not stored: %s", run_id, folder, exc)
        return False
    log.info("stored the record of run %s that its folder kept (%s)", run_id, folder)
    return True
