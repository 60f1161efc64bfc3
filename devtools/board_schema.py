"""A Grafana board checked against Grafana's own published schema, by the TypeScript compiler.

`@grafana/schema` (npm, Grafana Labs) is the dashboard model Grafana generates from its
schema: `Dashboard`, `Panel`, `RowPanel` and each panel plugin's `Options` and
`FieldConfig`. The board is written out as TypeScript literals of those types and `tsc`
type-checks them: an unknown field (excess property), a wrong type, or a value outside an
enum is an error. The pinned tools live in devtools/grafana (package-lock.json), installed by
`bin/dev install` with `npm ci`.

`python -m devtools.board_schema [board.json]` prints the errors (none: exit 0).
"""

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).resolve().parent / "grafana"
TSC = TOOLS / "node_modules" / ".bin" / "tsc"
DEFAULT_BOARD = TOOLS.parent.parent / "deploy" / "grafana" / "portal.json"
_CFG = "@grafana/schema/dist/esm/raw/composable/{0}/panelcfg/x/{1}PanelCfg_types.gen"
# Panel types the board may use, each with its plugin's published option types.
PLUGINS = {
    "timeseries": "TimeSeries",
    "stat": "Stat",
    "gauge": "Gauge",
    "bargauge": "BarGauge",
    "table": "Table",
    "text": "Text",
}
# JSON has no enums: a string enum of the schema's types takes its values as plain strings
# (`"line"` for GraphDrawStyle.Line); numbers must still be members of a numeric enum.
_PRELUDE = """\
import type { Dashboard, Panel, RowPanel } from "@grafana/schema";
{imports}
type Json<T> = unknown extends T ? T
  : T extends string ? `${T}`
  : T extends number | boolean | null | undefined ? T
  : T extends readonly (infer U)[] ? Json<U>[]
  : { [K in keyof T]: Json<T[K]> };
"""
_ERROR = re.compile(r"^(?P<file>[^(]+)\((?P<line>\d+),(?P<col>\d+)\): error (?P<text>.*)$")


class BoardToolsMissing(Exception):
    """devtools/grafana's node_modules is not installed (`python3 bin/dev install`)."""


def _json_lines(value: object, path: str = "") -> list[tuple[str, str]]:
    """The value as indented JSON lines, each with the path of the value it begins."""
    if isinstance(value, dict) and value:
        items = [(f"{json.dumps(k)}: ", f"{path}.{k}", v) for k, v in value.items()]
        brackets = "{}"
    elif isinstance(value, list) and value:
        items = [("", f"{path}[{i}]", v) for i, v in enumerate(value)]
        brackets = "[]"
    else:
        return [(json.dumps(value, ensure_ascii=False), path)]
    lines = [(brackets[0], path)]
    for number, (key, item_path, item) in enumerate(items):
        inner = _json_lines(item, item_path)
        inner[0] = (key + inner[0][0], inner[0][1])
        if number < len(items) - 1:
            inner[-1] = (inner[-1][0] + ",", inner[-1][1])
        lines += [("  " + text, at) for text, at in inner]
    return [*lines, (brackets[1], path)]


def _literal(name: str, type_: str, value: object) -> list[tuple[str, str]]:
    lines = _json_lines(value)
    lines[0] = (f"export const {name}: Json<{type_}> = {lines[0][0]}", lines[0][1])
    lines[-1] = (lines[-1][0] + ";", lines[-1][1])
    return lines


def board_source(board: dict[str, Any]) -> tuple[str, dict[int, str]]:
    """The board as TypeScript, and what each line (1-based) checks, for the error messages.

    The whole board is one `Dashboard`; each panel is checked again alone (a row against
    `RowPanel`), so that an error names the panel, with its options and its field config's
    `custom` part against its plugin's types. Plugin options are partial: Grafana's panel
    plugins fill in their defaults for what a board leaves out.
    """
    imports = [f'import type * as {t} from "{_CFG.format(t, PLUGINS[t])}";' for t in PLUGINS]
    lines = _PRELUDE.replace("{imports}", "\n".join(imports)).splitlines()
    labels: dict[int, str] = {}

    def add(what: str, chunk: list[tuple[str, str]]) -> None:
        for text, path in chunk:
            lines.append(text)
            labels[len(lines)] = f"{what}, at {path or 'its top'}"

    add("the board", _literal("board", "Dashboard", board))
    for index, (what, panel) in enumerate(_panels(board)):
        kind = panel.get("type")
        if kind == "row":
            add(what, _literal(f"panel{index}", "RowPanel", panel))
            continue
        if kind not in PLUGINS:
            continue  # board_errors says so
        add(what, _literal(f"panel{index}", "Panel", panel))
        add(
            what + " options",
            _literal(f"options{index}", f"Partial<{kind}.Options>", panel.get("options", {})),
        )
        custom = panel.get("fieldConfig", {}).get("defaults", {}).get("custom", {})
        add(
            what + " fieldConfig.defaults.custom",
            _literal(f"custom{index}", f"Partial<{kind}.FieldConfig>", custom),
        )
    return "\n".join(lines) + "\n", labels


def _panels(board: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every panel (a collapsed row's too), with the words that name it in an error."""
    found = []
    for panel in board.get("panels", []):
        for child, row in [(panel, None)] + [(c, panel) for c in panel.get("panels", [])]:
            what = f"panel {child.get('title')!r} (id {child.get('id')}, type {child.get('type')})"
            if row is not None:
                what += f" in row {row.get('title')!r}"
            found.append((what, child))
    return found


def board_errors(board: dict[str, Any]) -> list[str]:
    """What Grafana's schema finds wrong with the board, each naming its panel; [] if nothing."""
    if not TSC.exists():
        raise BoardToolsMissing(f"{TSC} is missing: run `python3 bin/dev install`")
    errors = [
        f"{what}: no panel plugin of this type has published types here ({', '.join(PLUGINS)})"
        for what, panel in _panels(board)
        if panel.get("type") != "row" and panel.get("type") not in PLUGINS
    ]
    source, labels = board_source(board)
    # The checked file lives beside node_modules, so that tsc finds the types as a package.
    with tempfile.TemporaryDirectory(dir=TOOLS, prefix=".check-") as folder:
        (Path(folder) / "board.ts").write_text(source)
        config = {
            "compilerOptions": {
                "strict": True,
                "noEmit": True,
                "skipLibCheck": True,
                "target": "es2022",
                "module": "esnext",
                "moduleResolution": "bundler",
                "types": [],
            },
            "files": ["board.ts"],
        }
        (Path(folder) / "tsconfig.json").write_text(json.dumps(config))
        checked = subprocess.run(
            [str(TSC), "--project", folder, "--pretty", "false"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    for line in checked.stdout.splitlines():
        found = _ERROR.match(line)
        if found:
            errors.append(f"{labels.get(int(found['line']), 'the prelude')}: {found['text']}")
        elif line.startswith(" ") and errors:
            errors[-1] += " " + line.strip()
        elif line.strip():
            errors.append(line)
    if checked.returncode != 0 and not errors:
        errors.append(f"tsc exited {checked.returncode}: {checked.stderr.strip()}")
    return errors


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else DEFAULT_BOARD
    errors = board_errors(json.loads(path.read_text()))
    print("\n".join(errors) or f"{path}: matches Grafana's dashboard schema")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
