#!/usr/bin/env python3
"""check-metric-names.py - checks that regionfs alert rules and dashboards
use only metrics that a live regionfs exposes.

usage: check-metric-names.py [--allow NAME]... [--target-label NAME]...
                             [--no-promtool] METRICS_PROM FILE...

METRICS_PROM is a copy of MNT/.regionfs/metrics.prom from a running mount.
Each FILE is a Prometheus rules or rules-test file (.yml/.yaml) or a Grafana
dashboard (.json). Every PromQL expression in them (rule `expr:` fields;
dashboard targets, annotation queries and template variable queries) is
tokenized, and each of these must hold:

  - every metric name is a family of METRICS_PROM, or given with --allow
    (for example node_textfile_mtime_seconds, which node_exporter adds);
  - every label matcher names a label that metric has in METRICS_PROM, or a
    target label (instance, job, plus --target-label ones such as mount);
    with '=' its value occurs in METRICS_PROM (except region and version,
    whose values are site-specific, and Grafana variables);
  - every by/without/on/ignoring label is such a label too;
  - counters appear only inside rate/irate/increase/resets, and
    rate/irate/increase are applied to counters only.

Besides, every regionfs_* word anywhere in a FILE (annotations, test series,
panel descriptions) must be a family of METRICS_PROM, and a dashboard must
be well formed: unique panel ids, a grid position for every panel and no
two overlapping, every query on the ${datasource} variable, every $variable
defined. If promtool is on PATH (and --no-promtool is not given), the
dashboard's PromQL expressions are also parsed by promtool check rules.

Python 3 standard library only. Exit status 0 if all is well, 1 if any
check failed (each problem is printed as FILE: message), 2 on usage errors.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

TARGET_LABELS = {"instance", "job"}
SITE_LABELS = {"region", "version", "instance", "job", "mount", "file"}
RANGE_FUNCS = {"rate", "irate", "increase", "resets"}
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar",
                "count", "count_values", "bottomk", "topk", "quantile",
                "limitk", "limit_ratio"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on",
            "ignoring", "group_left", "group_right", "inf", "nan", "atan2",
            "start", "end"}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
# Grafana's built-in interval variables, replaced by a duration for parsing.
GRAFANA_DURATIONS = ("$__rate_interval", "$__interval", "$__range")

TOKEN_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<num>(?:\d+(?:\.\d+)?(?:e[+-]?\d+)?(?:ms|[smhdwy])?)+)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=(){}\[\],@])
""", re.X)


class Metrics:
    """Families, their types and labels as found in a metrics.prom file."""

    def __init__(self, path):
        self.types = {}      # family -> counter|gauge|...
        self.labels = {}     # family -> {label: set(values)}
        sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s')
        pair = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("# TYPE "):
                    _, _, name, kind = line.split(None, 3)
                    self.types[name] = kind.strip()
                    self.labels.setdefault(name, {})
                    continue
                if line.startswith("#") or not line.strip():
                    continue
                m = sample.match(line)
                if not m:
                    raise ValueError(f"{path}: cannot parse: {line!r}")
                labels = self.labels.setdefault(m.group(1), {})
                for k, v in pair.findall(m.group(3) or ""):
                    labels.setdefault(k, set()).add(v)
        if not self.types:
            raise ValueError(f"{path}: no # TYPE lines: not metrics.prom?")


class Checker:
    def __init__(self, metrics, allow, target_labels):
        self.m = metrics
        self.allow = set(allow)
        self.target_labels = TARGET_LABELS | set(target_labels)
        self.problems = []
        self.exprs_checked = 0

    def problem(self, where, msg):
        self.problems.append(f"{where}: {msg}")

    def known(self, name):
        return name in self.m.types or name in self.allow

    def all_labels(self):
        out = set(self.target_labels)
        for labels in self.m.labels.values():
            out |= set(labels)
        return out

    # ---- PromQL -------------------------------------------------------------

    def tokenize(self, where, expr):
        for d in GRAFANA_DURATIONS:
            expr = expr.replace(d, "5m")
        toks, pos = [], 0
        while pos < len(expr):
            m = TOKEN_RE.match(expr, pos)
            if not m:
                self.problem(where, f"cannot tokenize at {expr[pos:]!r}")
                return None
            pos = m.end()
            if m.lastgroup != "ws":
                toks.append((m.lastgroup, m.group()))
        return toks

    def check_expr(self, where, expr, types=True):
        """Checks one PromQL expression (Grafana variables allowed); with
        types False, not how counters and gauges are used (a bare series
        selector, label_values())."""
        self.exprs_checked += 1
        toks = self.tokenize(where, expr)
        if toks is None:
            return
        i = 0
        while i < len(toks):
            kind, text = toks[i]
            nxt = toks[i + 1][1] if i + 1 < len(toks) else None
            if kind == "op" and text == "{":
                self.problem(where, "selector without a metric name")
            if kind != "ident":
                i += 1
                continue
            if text in GROUPING:
                i = self.grouping(where, toks, i + 1)
                continue
            if text in KEYWORDS or text in AGGREGATIONS or nxt == "(":
                i += 1
                continue
            i = self.selector(where, toks, i, types)

    def grouping(self, where, toks, i):
        """Label list after by/without/on/ignoring/group_x: checks names."""
        if i >= len(toks) or toks[i][1] != "(":
            return i
        i += 1
        known = self.all_labels()
        while i < len(toks) and toks[i][1] != ")":
            kind, text = toks[i]
            if kind == "ident" and text not in known:
                self.problem(where, f"grouping label '{text}' is not a "
                             "label of any regionfs metric")
            i += 1
        return i + 1

    def selector(self, where, toks, i, types):
        """A metric name at toks[i], maybe with {matchers}: checks it."""
        name = toks[i][1]
        if not self.known(name):
            self.problem(where, f"unknown metric '{name}'")
        if types:
            self.check_type_use(where, toks, i, name)
        i += 1
        if i >= len(toks) or toks[i][1] != "{":
            return i
        i += 1
        labels = self.m.labels.get(name)
        while i + 2 < len(toks) and toks[i][1] != "}":
            (k1, label), (_, op), (k3, value) = toks[i:i + 3]
            if k1 != "ident" or k3 != "str":
                self.problem(where, f"cannot parse matchers of '{name}'")
                break
            value = value[1:-1]
            if labels is not None and label not in labels and \
                    label not in self.target_labels:
                self.problem(where, f"'{name}' has no label '{label}'")
            elif labels is not None and op == "=" and "$" not in value and \
                    label not in SITE_LABELS and \
                    value not in labels.get(label, ()):
                self.problem(where, f"'{name}' never has {label}=\"{value}\""
                             f" (seen: {sorted(labels.get(label, ()))})")
            i += 3
            if toks[i][1] == ",":
                i += 1
        return i + 1

    def check_type_use(self, where, toks, i, name):
        kind = self.m.types.get(name)
        func = None
        if i >= 2 and toks[i - 1][1] == "(" and toks[i - 2][0] == "ident":
            func = toks[i - 2][1]
        if kind == "counter" and func not in RANGE_FUNCS:
            self.problem(where, f"counter '{name}' used outside "
                         "rate/irate/increase/resets")
        if kind not in (None, "counter") and func in RANGE_FUNCS:
            self.problem(where, f"{func}() of {kind} '{name}'")

    # ---- whole files --------------------------------------------------------

    def check_words(self, path, text):
        for name in sorted(set(re.findall(r"\bregionfs_[a-z0-9_]+", text))):
            if not self.known(name):
                self.problem(path, f"mentions unknown metric '{name}'")

    def check_yaml(self, path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        self.check_words(path, text)
        for lineno, key, expr in yaml_exprs(text):
            self.check_expr(f"{path}:{lineno}", expr, types=key == "expr")

    def check_dashboard(self, path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            dash = json.loads(text)
        except json.JSONDecodeError as e:
            self.problem(path, f"not valid JSON: {e}")
            return []
        self.check_words(path, text)
        self.check_layout(path, dash)
        variables = {v.get("name") for v in
                     dash.get("templating", {}).get("list", [])}
        for var in sorted(set(re.findall(r"\$\{?([a-zA-Z_]\w*)", text))):
            if var not in variables and not var.startswith("__"):
                self.problem(path, f"uses undefined variable ${var}")
        promql = []
        for where, expr in dashboard_exprs(dash):
            where = f"{path}: {where}"
            lv = re.fullmatch(r"\s*label_values\((.*?)(?:,\s*(\w+))?\)\s*",
                              expr, re.S)
            if lv:
                inner, label = lv.group(1), lv.group(2)
                if label is None:
                    inner, label = None, lv.group(1).strip()
                if label not in self.all_labels():
                    self.problem(where, f"label_values of unknown label "
                                 f"'{label}'")
                if inner:
                    self.check_expr(where, inner, types=False)
                continue
            self.check_expr(where, expr)
            promql.append((where, expr))
        return promql

    def check_layout(self, path, dash):
        if not isinstance(dash.get("schemaVersion"), int):
            self.problem(path, "no schemaVersion")
        seen, boxes = set(), []
        for p in walk_panels(dash.get("panels", [])):
            pid = p.get("id")
            if pid in seen:
                self.problem(path, f"panel id {pid} is used twice")
            seen.add(pid)
            g = p.get("gridPos")
            if not g or not all(k in g for k in ("x", "y", "w", "h")):
                self.problem(path, f"panel {pid} has no complete gridPos")
                continue
            if g["x"] + g["w"] > 24:
                self.problem(path, f"panel {pid} is wider than the grid")
            for other, og in boxes:
                if g["x"] < og["x"] + og["w"] and og["x"] < g["x"] + g["w"] \
                        and g["y"] < og["y"] + og["h"] and \
                        og["y"] < g["y"] + g["h"]:
                    self.problem(path, f"panels {other} and {pid} overlap")
            boxes.append((pid, g))
            ds = p.get("datasource")
            if p.get("type") != "row" and \
                    (not ds or ds.get("uid") != "${datasource}"):
                self.problem(path, f"panel {pid} does not use ${{datasource}}")
            for t in p.get("targets", []):
                if t.get("datasource", {}).get("uid") != "${datasource}":
                    self.problem(path, f"panel {pid} target {t.get('refId')}"
                                 " does not use ${datasource}")


def walk_panels(panels):
    for p in panels:
        yield p
        yield from walk_panels(p.get("panels", []))


def dashboard_exprs(dash):
    """(where, expr) of every query of a Grafana dashboard."""
    for p in walk_panels(dash.get("panels", [])):
        for t in p.get("targets", []):
            if t.get("expr"):
                yield f"panel '{p.get('title')}' {t.get('refId')}", t["expr"]
    for a in dash.get("annotations", {}).get("list", []):
        if a.get("expr"):
            yield f"annotation '{a.get('name')}'", a["expr"]
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        if q:
            yield f"variable '{v.get('name')}'", q


def yaml_exprs(text):
    """(line, key, expr) of every `expr:` of a rules file and `series:` of
    a rules test file. Handles the forms these files use: a plain or
    quoted scalar on the line, or a block scalar (>, >-, |, |-) indented
    below it."""
    lines = text.split("\n")
    out = []
    for n, line in enumerate(lines):
        m = re.match(r"^(\s*)(?:-\s+)?(expr|series):\s*(.*?)\s*$", line)
        if not m:
            continue
        indent, key, rest = len(m.group(1)), m.group(2), m.group(3)
        if re.fullmatch(r"[>|][+-]?", rest):
            block = []
            for nxt in lines[n + 1:]:
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                    break
                block.append(nxt.strip())
            sep = "\n" if rest.startswith("|") else " "
            out.append((n + 1, key, sep.join(block).strip()))
        elif rest[:1] in ("'", '"'):
            q = rest[0]
            body = rest[1:-1] if rest.endswith(q) else rest[1:]
            if q == "'":
                body = body.replace("''", "'")
            else:
                body = bytes(body, "utf-8").decode("unicode_escape")
            out.append((n + 1, key, body))
        else:
            out.append((n + 1, key, rest))
    return out


def promtool_parse(promql):
    """Parses expressions with promtool check rules; returns problems."""
    if not promql:
        return []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "exprs.yml")
        with open(path, "w", encoding="utf-8") as f:
            f.write("groups:\n  - name: dashboard\n    rules:\n")
            for n, (_, expr) in enumerate(promql):
                for var in ("$instance", "$region"):
                    expr = expr.replace(var, "x")
                for dur in GRAFANA_DURATIONS:
                    expr = expr.replace(dur, "5m")
                f.write(f"      - record: check:expr_{n}\n"
                        f"        expr: {json.dumps(expr)}\n")
        r = subprocess.run(["promtool", "check", "rules", path],
                           capture_output=True, text=True, check=False)
        if r.returncode != 0:
            return [f"promtool rejects a dashboard expression: "
                    f"{r.stdout}{r.stderr}"]
    return []


def main(argv):
    allow, tlabels, use_promtool, args = [], [], True, []
    it = iter(argv)
    for a in it:
        if a in ("--allow", "--target-label"):
            v = next(it, None)
            if v is None:
                print(f"{a} needs a value", file=sys.stderr)
                return 2
            (allow if a == "--allow" else tlabels).append(v)
        elif a == "--no-promtool":
            use_promtool = False
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            args.append(a)
    if len(args) < 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        metrics = Metrics(args[0])
    except (OSError, ValueError) as e:
        print(f"check-metric-names: {e}", file=sys.stderr)
        return 2
    c = Checker(metrics, allow, tlabels)
    promql = []
    for path in args[1:]:
        if path.endswith(".json"):
            promql += c.check_dashboard(path)
        else:
            c.check_yaml(path)
    if use_promtool and shutil.which("promtool"):
        c.problems += promtool_parse(promql)
    for p in c.problems:
        print(p)
    print(f"check-metric-names: {c.exprs_checked} expressions in "
          f"{len(args) - 1} files, {len(metrics.types)} metric families: "
          f"{len(c.problems)} problems")
    return 1 if c.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
