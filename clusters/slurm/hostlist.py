"""Slurm's compact host lists (`gpu[01-03,07],login1`), as the node names they stand for."""


def expand_nodes(node_list: str) -> list[str]:
    """Slurm's compact host list (`n[1-3,7],gpu05`) as names."""
    names: list[str] = []
    depth, start = 0, 0
    parts: list[str] = []
    for index, char in enumerate(node_list):
        depth += char == "["
        depth -= char == "]"
        if char == "," and depth == 0:
            parts.append(node_list[start:index])
            start = index + 1
    parts.append(node_list[start:])
    for part in filter(None, (p.strip() for p in parts)):
        if "[" not in part:
            names.append(part)
            continue
        prefix, _, rest = part.partition("[")
        ranges, _, suffix = rest.partition("]")
        for item in ranges.split(","):
            low, _, high = item.partition("-")
            if not high:
                names.append(f"{prefix}{low}{suffix}")
            elif low.isdigit() and high.isdigit():
                for number in range(int(low), int(high) + 1):
                    names.append(f"{prefix}{str(number).zfill(len(low))}{suffix}")
    return names
