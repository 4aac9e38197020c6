"""Action manifests: YAML -> compiled actions, with compiler-grade errors (contract §6).

``load_manifest_dir(path)`` returns the compiled actions or raises ``ManifestErrors`` naming the
file, line and field path of every problem in every file.
"""

from signoff.executors.http.executor import HttpExecutor
from signoff.manifest.build import LoadedAction
from signoff.manifest.cases import CaseResult, run_cases
from signoff.manifest.errors import ManifestErrors, ManifestProblem, ProblemCode
from signoff.manifest.loader import ManifestSet, load_manifest_dir, load_manifests
from signoff.manifest.reload import ManifestReloader
from signoff.manifest.schema import manifest_json_schema, shipped_schema_text

__all__ = [
    "CaseResult",
    "HttpExecutor",
    "LoadedAction",
    "ManifestErrors",
    "ManifestProblem",
    "ManifestReloader",
    "ManifestSet",
    "ProblemCode",
    "load_manifest_dir",
    "load_manifests",
    "manifest_json_schema",
    "run_cases",
    "shipped_schema_text",
]
