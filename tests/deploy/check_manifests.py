"""The deployment examples are checked, not only written: every YAML document under deploy/
parses; the Kubernetes kinds of the core API (Service, StatefulSet, Job, ...) validate against the
Kubernetes schemas (kubernetes-validate, from PyPI, with its bundled schemas); custom resources
(ServiceMonitor, Argo's Workflow) are checked for their apiVersion, kind and name; every
metric the Grafana dashboard queries is one `mm serve` registers (pipelines/serve/src/metrics.rs);
and, given the `mm` binary, every flag an example passes to `mm` (a container of the `mm` image
in the YAML, an `mm ...` command line in the Airflow DAGs) is one that subcommand accepts.

Usage: check_manifests.py [REPO] [--mm PATH]   (exits 1 naming each problem)
"""

import json
import pathlib
import re
import subprocess
import sys

import kubernetes_validate
import yaml

ARGS = sys.argv[1:]
MM = None
if "--mm" in ARGS:
    i = ARGS.index("--mm")
    MM = ARGS[i + 1]
    del ARGS[i:i + 2]
REPO = pathlib.Path(ARGS[0] if ARGS else ".").resolve()
K8S_VERSION = "1.33"
CUSTOM = {"monitoring.coreos.com/v1", "argoproj.io/v1alpha1"}


HELP = {}


def mm_flags(words):
    """The flags `mm WORDS... --help` lists."""
    key = tuple(words)
    if key not in HELP:
        out = subprocess.run([MM, *words, "--help"], capture_output=True, text=True, timeout=60)
        HELP[key] = set(re.findall(r"(--[a-z][\w-]*)", out.stdout)) if out.returncode == 0 else None
    return HELP[key]


def check_command(args, where, problems):
    """`args` after `mm`: the subcommand words, then flags the subcommand must accept."""
    words = []
    for a in args:
        if a.startswith("-"):
            break
        words.append(a)
    flags = mm_flags(words)
    if flags is None:
        problems.append(f"{where}: `mm {' '.join(words)}` is not an mm command")
        return 0
    checked = 0
    for a in args[len(words):]:
        if a.startswith("--"):
            flag = a.split("=", 1)[0]
            checked += 1
            if flag not in flags:
                problems.append(f"{where}: `mm {' '.join(words)}` has no flag {flag}")
    return checked


def containers(node):
    """Every container spec of the `mm` image under a YAML document."""
    if isinstance(node, dict):
        if str(node.get("image", "")).startswith("mm:") and "args" in node:
            yield node
        for v in node.values():
            yield from containers(v)
    elif isinstance(node, list):
        for v in node:
            yield from containers(v)


def check_commands(problems):
    """Flags of every `mm` command in the examples; the number checked."""
    checked = 0
    for path in sorted((REPO / "deploy").rglob("*.y*ml")):
        for doc in yaml.safe_load_all(path.read_text()):
            for c in containers(doc):
                where = f"{path.relative_to(REPO)}: container {c.get('name', '?')}"
                checked += check_command([str(a) for a in c["args"]], where, problems)
    for path in sorted((REPO / "deploy").rglob("*.py")):
        for line in path.read_text().splitlines():
            for cmd in re.findall(r'"mm ([^"{]*)', line):
                checked += check_command(cmd.split(), f"{path.relative_to(REPO)}: {cmd}", problems)
    return checked


def main():
    problems = []
    docs = 0
    for path in sorted((REPO / "deploy").rglob("*.y*ml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is None:
                continue
            docs += 1
            meta = doc.get("metadata", {})
            name = meta.get("name") or meta.get("generateName")
            where = f"{path.relative_to(REPO)}: {doc.get('kind')} {name}"
            if doc.get("apiVersion") in CUSTOM:
                if not (doc.get("kind") and name and doc.get("spec")):
                    problems.append(f"{where}: a custom resource needs kind, a name and spec")
                continue
            try:
                kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
            except kubernetes_validate.ValidationError as e:
                problems.append(f"{where}: {e.message} at {'/'.join(map(str, e.path))}")
    registered = set()
    source = (REPO / "pipelines/serve/src/metrics.rs").read_text()
    for name in re.findall(r'register\(\s*"(\w+)"', source):
        registered.add(f"mm_serve_{name}")
    dashboards = sorted((REPO / "deploy").rglob("grafana-*.json"))
    queried = 0
    for path in dashboards:
        dash = json.loads(path.read_text())
        for panel in dash["panels"]:
            for t in panel["targets"]:
                for m in re.findall(r"mm_serve_\w+", t["expr"]):
                    queried += 1
                    base = re.sub(r"_(total|bucket|sum|count)$", "", m)
                    if base not in registered:
                        problems.append(f"{path.relative_to(REPO)}: panel {panel['title']!r} "
                                        f"queries {m}, which mm serve does not export")
    flags = check_commands(problems) if MM else 0
    if MM and flags == 0:
        problems.append("no mm command line found in deploy/")
    for p in problems:
        print(p)
    print(f"check_manifests: {docs} documents, {len(dashboards)} dashboards "
          f"({queried} metric references, {len(registered)} metrics registered), "
          f"{flags} mm flags checked, "
          f"{len(problems)} problems")
    sys.exit(1 if problems or docs == 0 or queried == 0 else 0)


if __name__ == "__main__":
    main()
