"""The ``gcexplore`` command line.

Each subcommand is one ``_cmd_<name>(args) -> int`` function registered in
:func:`_parser`.
"""

from __future__ import annotations

import argparse
import sys


def _cmd_info(args) -> int:
    from .api import UnsupportedError, device_count, device_info

    try:
        n = device_count()
    except UnsupportedError as e:
        print(f"gcexplore info: {e}", file=sys.stderr)
        return 1
    if n == 0:
        print("gcexplore info: the driver sees no CUDA device", file=sys.stderr)
        return 1
    for i in range(n):
        try:
            info = device_info(i)
        except UnsupportedError as e:
            print(f"device {i}: {e}")
            continue
        feats = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in info.features.items())
        print(f"device {info.index}: {info.name}")
        print(f"  compute capability  {info.compute_capability[0]}.{info.compute_capability[1]}")
        print(f"  SMs                 {info.sm_count}")
        print(f"  min partition size  {info.min_partition_size}")
        print(f"  alignment           {info.alignment}")
        print(f"  valid sizes         {', '.join(map(str, info.valid_sm_counts()))}")
        print(f"  driver              {info.driver_version_str} ({info.driver_version})")
        print(f"  cuda.core           {info.cuda_core_version}")
        print(f"  cuda.bindings       {info.cuda_bindings_version}")
        print(f"  features            {feats}")
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gcexplore", description="Explore and profile CUDA green contexts.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("info", help="print what each visible GPU allows for green contexts")
    s.set_defaults(func=_cmd_info)
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
