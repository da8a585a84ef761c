"""``gcexplore campaign SPEC | status DIR | repair DIR``: a spec read with bounded size and
depth, the folder read without changing it (``repair`` is the one command that moves
damaged shards aside)."""

from __future__ import annotations

import os
from pathlib import Path

from ..cli.args import Usage

#: A campaign spec larger or deeper than this is refused before it is parsed.
MAX_SPEC_BYTES = 1 << 20
MAX_SPEC_DEPTH = 32
_KNOWN = ("experiment", "workloads", "splits", "options", "cards", "folder", "devices", "cut")

SPEC_IS_CODE = ("A spec is code: its experiment and workload factories ('module:function') are imported and "
                "run with your rights, like a script, so run only specs you would run as a script. They are "
                "imported only after the whole spec is checked; a factory's kwargs must be named parameters "
                "of it; the spec's folder is not put on the import path (set PYTHONPATH for your modules). "
                "The local cluster listens on 127.0.0.1 only.")


def _toml_depth(text: str) -> int:
    """The deepest nesting of arrays and inline tables in TOML text, found without parsing it."""
    depth = deepest = i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "#":
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif c in "\"'":
            quote = c * 3 if text.startswith(c * 3, i) else c
            j = i + len(quote)
            while j < n and not text.startswith(quote, j):
                j += 2 if c == '"' and text[j] == "\\" else 1
            i = j + len(quote) - 1
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth = max(0, depth - 1)
        i += 1
    return deepest


def _value_depth(value, limit: int) -> int:
    """The nesting of lists and dicts in a parsed spec, counted without recursion (stops past ``limit``):
    TOML's dotted keys and table headers (``a.b.c... = 1``, ``[a.b.c...]``) nest without brackets."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d + 1)
            if deepest > limit:
                return deepest
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def _yaml_checked(text: str, path: str):
    """The YAML document, after a pass over its events: no aliases (an alias bomb expands
    exponentially), no nesting deeper than :data:`MAX_SPEC_DEPTH`."""
    import yaml

    depth = 0
    try:
        for ev in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(ev, yaml.AliasEvent):
                raise Usage(f"{path!r} uses a YAML alias (*{ev.anchor}); a campaign spec spells every value out "
                            "(aliases can expand exponentially)")
            if isinstance(ev, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_SPEC_DEPTH:
                    raise Usage(f"{path!r} nests deeper than {MAX_SPEC_DEPTH} levels; a campaign spec needs a few")
            elif isinstance(ev, yaml.CollectionEndEvent):
                depth -= 1
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise Usage(f"{path!r} is not valid YAML ({e})") from None


def read_spec(path: str) -> dict:
    """A campaign spec from TOML (tomllib) or YAML (when PyYAML is installed), size and depth
    checked before it is parsed."""
    from .store import NotRegular, read_bounded

    p = Path(path)
    try:
        data = read_bounded(p, MAX_SPEC_BYTES)
    except FileNotFoundError:
        raise FileNotFoundError(f"no campaign spec {path!r} (a .toml or .yaml file, or `campaign status DIR`)") \
            from None
    except NotRegular as e:
        raise Usage(f"{e}; a campaign spec is a plain .toml or .yaml file") from None
    except ValueError as e:
        raise Usage(f"{e}: a campaign spec is at most {MAX_SPEC_BYTES} bytes") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Usage(f"{path!r} is not UTF-8 text ({e})") from None
    if p.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml  # noqa: F401
        except ImportError:
            raise Usage(f"{path!r} is YAML but PyYAML is not installed; pip install pyyaml or write TOML") from None
        spec = _yaml_checked(text, path)
    else:
        try:
            import tomllib
        except ImportError:  # Python 3.10
            import tomli as tomllib
        if _toml_depth(text) > MAX_SPEC_DEPTH:
            raise Usage(f"{path!r} nests deeper than {MAX_SPEC_DEPTH} levels; a campaign spec needs a few")
        try:
            spec = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, RecursionError) as e:
            raise Usage(f"{path!r} is not valid TOML ({type(e).__name__}: {str(e)[:200]})") from None
    if _value_depth(spec, MAX_SPEC_DEPTH) > MAX_SPEC_DEPTH:  # every form: brackets, dotted keys, table headers
        raise Usage(f"{path!r} nests deeper than {MAX_SPEC_DEPTH} levels; a campaign spec needs a few")
    if not isinstance(spec, dict) or set(spec) - set(_KNOWN) or "workloads" not in spec:
        unknown = sorted(map(str, set(spec) - set(_KNOWN))) if isinstance(spec, dict) else []
        extra = f"; unknown keys: {', '.join(unknown)}" if isinstance(spec, dict) else ""
        raise Usage(f"{path!r} must be a table with workloads and optionally "
                    f"{', '.join(k for k in _KNOWN if k != 'workloads')}{extra}")
    return spec


def _print_status(status) -> None:
    from ..cli._text import one_line, print_lines

    n = status.attrs["counts"]
    print(one_line(f"campaign {status.attrs['campaign_id']} in {status.attrs['folder']}: {n['done']} of "
                   f"{len(status)} tasks done, {n['failed']} failed, {n['started']} started, {n['pending']} pending"))
    print_lines(status.attrs["torn"], "  set aside: ")
    print_lines((f"{r.task_key}: {r.error.splitlines()[0] if r.error else '?'}"
                 for r in status[status["status"] == "failed"].itertuples()), "  failed ")


def cmd_campaign(args) -> int:
    from .store import campaign_status

    if args.target in ("status", "repair"):
        if not args.folder:
            raise Usage(f"campaign {args.target} needs the campaign folder: gcexplore campaign {args.target} DIR")
        _print_status(campaign_status(args.folder, repair=args.target == "repair"))
        return 0
    if args.folder:
        raise Usage(f"unexpected {args.folder!r}: run `gcexplore campaign SPEC`, `gcexplore campaign status DIR` "
                    "or `gcexplore campaign repair DIR`")
    spec = read_spec(args.target)
    from .grid import campaign

    from .warm import SCHEDULER_ENV

    folder = args.out or spec.get("folder") or "gcexplore-out/campaign"
    c = campaign(spec["workloads"], spec.get("splits"), experiment=spec.get("experiment", "sweep"),
                 options=spec.get("options"), cards=spec.get("cards", "any"), folder=folder,
                 scheduler=args.scheduler or os.environ.get(SCHEDULER_ENV) or None, devices=spec.get("devices"),
                 cut=spec.get("cut"), progress=not args.quiet)
    status = c.status()
    _print_status(status)
    from ..cli._text import print_lines

    # a task the disk had no room for: where its measured rows went (campaigns/disk_full.py)
    print_lines((f"{k}: its {r.get('rows', 0)} measured rows: {r['rows_at']}" for k, r in c.reports.items()
                 if "rows_at" in r), "  kept ")
    return 1 if status.attrs["counts"]["failed"] else 0


def add_campaign(sub) -> None:
    s = sub.add_parser("campaign", help="run a grid of experiments (a TOML or YAML spec) as Dask tasks, resumable; "
                                        "`campaign status DIR` shows a campaign folder (reading only), "
                                        "`campaign repair DIR` moves its damaged shards aside",
                       description="Run a grid of experiments as Dask tasks, one shard per task, resumable. "
                                   + SPEC_IS_CODE)
    s.add_argument("target", metavar="SPEC|status|repair", help="the spec file, or 'status' or 'repair'")
    s.add_argument("folder", nargs="?", metavar="DIR", help="with 'status' or 'repair': the campaign folder")
    s.add_argument("--scheduler", metavar="ADDR", help="a running Dask scheduler (tcp:// or tls://host:8786); "
                                                        "default: $GCEXPLORE_SCHEDULER, else a local cluster on "
                                                        "127.0.0.1 with one worker per visible GPU (a warm one: "
                                                        "`gcexplore cluster start`)")
    s.add_argument("--out", metavar="DIR", help="the campaign folder (default: the spec's folder, else "
                                                "gcexplore-out/campaign); rerunning on it resumes")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_campaign)


def cmd_cluster(args) -> int:
    from . import grid, warm

    if args.action != "start":
        if args.spec or args.warm or args.devices or args.workers is not None or args.host or args.tls_ca:
            raise Usage(f"`gcexplore cluster {args.action}` takes only --state")
        if args.action == "status":
            rec, text = warm.status(args.state)
            print(text)
            return 0 if rec is not None else 1
        print(warm.stop(args.state))
        return 0
    modules = set(grid.spec_modules(read_spec(args.spec))) if args.spec else set()
    modules |= {m.strip() for m in (args.warm or "").split(",") if m.strip()}
    tls = [args.tls_ca, args.tls_cert, args.tls_key]
    if any(tls) and not all(tls):
        raise Usage("TLS needs all three of --tls-ca, --tls-cert and --tls-key")
    devices = [d.strip() for d in args.devices.split(",") if d.strip()] if args.devices else None
    rec, note = warm.start(state=args.state, devices=devices, workers=args.workers, modules=sorted(modules),
                           host=args.host or "127.0.0.1",
                           tls=dict(zip(("ca", "cert", "key"), map(os.path.abspath, tls))) if all(tls) else None)
    if note:
        print(note)
    print(warm.describe(rec, warm.default_state(args.state)))
    return 0


def add_cluster(sub) -> None:
    s = sub.add_parser("cluster", help="a warm campaign cluster later commands reuse: `cluster start [SPEC]`, "
                                       "`cluster status`, `cluster stop`",
                       description="Start, show or stop a warm Dask cluster (one worker per GPU, or CPU workers "
                                   "where there is none) that `gcexplore campaign SPEC --scheduler ADDR` (or "
                                   "GCEXPLORE_SCHEDULER=ADDR) reuses, its modules imported once. It is recorded "
                                   "in a private folder (the runtime or cache dir, or --state) with gcexplore's "
                                   "version and its modules' source hashes: a campaign refuses it where they "
                                   "differ, and a cluster whose processes died is reported and cleaned up. "
                                   "It listens on 127.0.0.1 unless --host and TLS are given. " + SPEC_IS_CODE)
    s.add_argument("action", choices=("start", "status", "stop"))
    s.add_argument("spec", nargs="?", metavar="SPEC", help="with start: a campaign spec whose factory and "
                                                           "experiment modules every worker imports as it starts")
    s.add_argument("--warm", metavar="MODULES", help="with start: more modules to import (comma-separated)")
    s.add_argument("--devices", metavar="LIST", help="with start: GPUs (default every visible one)")
    s.add_argument("--workers", type=int, metavar="N", help="with start, where no GPU is visible: N CPU workers "
                                                             "(default 2)")
    s.add_argument("--host", metavar="ADDR", help="with start: the interface to listen on (default 127.0.0.1; "
                                                  "another needs the TLS files)")
    s.add_argument("--tls-ca", metavar="FILE", help="with start: the certificate authority peers must be signed by")
    s.add_argument("--tls-cert", metavar="FILE", help="with start: the certificate of the scheduler, workers and "
                                                      "client")
    s.add_argument("--tls-key", metavar="FILE", help="with start: its private key")
    s.add_argument("--state", metavar="FILE", help="the state file (default $GCEXPLORE_CLUSTER_STATE, else "
                                                   "cluster.json in the user's runtime or cache dir)")
    s.set_defaults(func=cmd_cluster)
