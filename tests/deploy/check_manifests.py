"""The deployment examples are checked, not only written: every YAML document under deploy/
parses; the Kubernetes kinds of the core API (Service, StatefulSet, Job, ...) validate against the
Kubernetes schemas (kubernetes-validate, from PyPI, with its bundled schemas); custom resources
(ServiceMonitor, Argo's Workflow) are checked for their apiVersion, kind and name; and every
metric the Grafana dashboard queries is one `mm serve` registers (pipelines/serve/src/metrics.rs).

Usage: check_manifests.py [REPO]   (exits 1 naming each problem)
"""

import json
import pathlib
import re
import sys

import kubernetes_validate
import yaml

REPO = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
K8S_VERSION = "1.33"
CUSTOM = {"monitoring.coreos.com/v1", "argoproj.io/v1alpha1"}


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
    for p in problems:
        print(p)
    print(f"check_manifests: {docs} documents, {len(dashboards)} dashboards "
          f"({queried} metric references, {len(registered)} metrics registered), "
          f"{len(problems)} problems")
    sys.exit(1 if problems or docs == 0 or queried == 0 else 0)


if __name__ == "__main__":
    main()
