"""Where a session's JupyterLab starts, and its news prompt switched off (issue 39 polish).

The script's lines are asserted as text, then run by bash with a program in jupyter's
place that prints what it was given: the flags after the shell expanded them, and the
config directory the server would search first.
"""

import json
import shlex
import subprocess
from pathlib import Path

from jobs.enums import Template
from jobs.interactive import ANNOUNCEMENTS_PLUGIN, LAB_CONFIG_DIR, session_command_lines
from jobs.models import Job
from jobs.rundir import WORKDIR_FILE, RunDir
from jobs.scripts import render_batch_script
from tests import factories

# Prints JUPYTER_CONFIG_PATH, then each argument on a line of its own.
ECHO = 'sh -c \'echo "$JUPYTER_CONFIG_PATH"; printf "%s\\n" "$@"\' jupyter'


def test_the_server_starts_in_the_working_directory_without_news(db: None) -> None:
    start = session_command_lines(Job(pk=7, template=Template.JUPYTER, command="jupyter lab"))
    script = "\n".join(start)
    assert '--ServerApp.root_dir="$PWD"' in start[-1]
    assert "--LabApp.news_url=None" in start[-1]
    assert "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate" in start[-1]
    assert f'export JUPYTER_CONFIG_PATH="$PORTAL_RUN_DIR/{LAB_CONFIG_DIR}"' in script
    assert ANNOUNCEMENTS_PLUGIN in script
    # Nothing of the user's is written: no ~/.jupyter, no `jupyter labextension disable`.
    assert "~/.jupyter" not in script and "labextension" not in script


def test_the_root_is_the_directory_the_workdir_file_names(project, owner, cluster) -> None:
    job, attempt = factories.session(project, owner, cluster, setup="cd -- ~/project")
    script = render_batch_script(job=job, attempt=attempt, run_dir=RunDir("/runs/x"))
    after_setup = script.split("cd -- ~/project", 1)[1]
    # The workdir file is written after the set-up, and the server starts from there.
    assert after_setup.index(WORKDIR_FILE) < after_setup.index('--ServerApp.root_dir="$PWD"')
    assert "--ServerApp.root_dir" not in script.split("cd -- ~/project", 1)[0]


def test_bash_gives_the_server_its_root_and_config(tmp_path: Path, db: None) -> None:
    run_dir = tmp_path / "run dir"
    run_dir.mkdir()
    work = tmp_path / "my notebooks"
    work.mkdir()
    lines = session_command_lines(Job(pk=7, template=Template.JUPYTER, command=ECHO))
    shown = subprocess.run(
        ["/bin/bash", "-c", f"cd -- {shlex.quote(str(work))} && " + "\n".join(lines)],
        env={"PORTAL_RUN_DIR": str(run_dir), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.splitlines()
    config_dir = run_dir / LAB_CONFIG_DIR
    assert shown[0] == str(config_dir)
    assert f"--ServerApp.root_dir={work}" in shown
    assert "--LabApp.news_url=None" in shown
    page_config = json.loads((config_dir / "labconfig" / "page_config.json").read_text())
    assert page_config == {"disabledExtensions": {ANNOUNCEMENTS_PLUGIN: True}}
