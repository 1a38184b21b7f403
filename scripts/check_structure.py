#!/usr/bin/env python3
"""Structure checks of the library (issue 22): no call cycles between files, at most 7 parameters.

Usage: python3 scripts/check_structure.py BUILD_DIR [DIR...]

(a) Call cycles. From the library's object files (CMake's ndstore_obj objects under
    BUILD_DIR/CMakeFiles/ndstore_obj.dir/, and the CLI's objects when built) the global symbols each
    file defines and uses (`nm`) give the file-level call graph: file A -> file B when A uses a
    function B defines (references to data, such as the registry's table of vtables, are not calls). Every strongly connected component of more than one file is a cycle; they are
    printed per source directory (lib/, drivers/, formats/, cli/).
(b) Parameter counts. The C function definitions in each DIR (recursively; default: lib drivers
    formats cli) are parsed and every one taking more than MAX_PARAMS parameters is printed as
    "file:line name count". Exempt are only the callbacks whose type another library fixes
    (FIXED_SIGNATURES, each with that type named): their parameter list is not ours to choose.

Given DIRs also restrict (a) to the cycles that touch a file in them. Prints nothing and exits 0 when
both checks pass; exits 1 when anything is printed, 2 on a usage error. Standard library only.
`check_structure.py --self-test` checks the parser and the cycle search on built-in examples.
"""
import os
import re
import subprocess
import sys

MAX_PARAMS = 7
# (file, function) -> the foreign callback type that fixes its parameters; nothing else is exempt.
FIXED_SIGNATURES = {
    ("cli/serve_request.c", "serve_answer"): "libmicrohttpd's MHD_AccessHandlerCallback (8)",
}
DEFAULT_DIRS = ["lib", "drivers", "formats", "cli"]
OBJECT_DIRS = ["ndstore_obj.dir", "ndstore_cli.dir"]  # the library's objects, then the CLI's
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---- (a) call cycles from the object files ----

def object_files(build_dir):
    """(source path relative to the tree, object path) for every object of the targets."""
    out = []
    for target in OBJECT_DIRS:
        base = os.path.join(build_dir, "CMakeFiles", target)
        for dirpath, _, names in os.walk(base):
            for name in sorted(names):
                if name.endswith(".c.o"):
                    path = os.path.join(dirpath, name)
                    src = os.path.relpath(path, base)[: -len(".o")]
                    # A build directory reused across commits keeps the objects of sources
                    # since removed: they are not part of the library any more.
                    if os.path.isfile(os.path.join(ROOT, src)):
                        out.append((src, path))
    return out


def symbols(obj):
    """The global functions obj defines and the symbols it leaves undefined. Data (a driver or
    format vtable named in lib/builtins.c's registry table) is not a call and makes no edge."""
    text = subprocess.run(["nm", obj], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] == "T":
            defined.add(parts[2])
    return defined, undefined


def call_graph(objs):
    """file -> the set of other files whose symbols it uses."""
    owner, uses = {}, {}
    for src, obj in objs:
        defined, undefined = symbols(obj)
        for s in defined:
            owner.setdefault(s, src)
        uses[src] = undefined
    return {src: {owner[s] for s in used if s in owner and owner[s] != src}
            for src, used in uses.items()}


def components(graph):
    """Tarjan's strongly connected components (iterative: no recursion limit)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                out.append(sorted(comp))
    return out


def in_dirs(path, dirs):
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)


def report_cycles(build_dir, dirs):
    objs = object_files(build_dir)
    if not objs:
        sys.exit(f"check_structure: no objects under {build_dir}/CMakeFiles/ndstore_obj.dir "
                 "(build the ndstore target first)")
    graph = call_graph(objs)
    cycles = [c for c in components(graph) if len(c) > 1 and any(in_dirs(f, dirs) for f in c)]
    by_dir = {}
    for comp in cycles:
        tops = sorted({f.split("/")[0] + "/" for f in comp})
        by_dir.setdefault(" ".join(tops), []).append(comp)
    lines = []
    for where in sorted(by_dir):
        for comp in by_dir[where]:
            members = set(comp)
            edges = [f"{a} -> {b}" for a in comp for b in sorted(graph[a]) if b in members]
            lines.append(f"cycle in {where}: {', '.join(comp)}")
            lines.extend(f"    {e}" for e in edges)
    return len(cycles), lines


# ---- (b) parameter counts of function definitions ----

TOKEN = re.compile(r"""
    (?P<comment>/\*.*?\*/|//[^\n]*)
  | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<pp>^[ \t]*\#(?:\\\n|[^\n])*)
""", re.S | re.M | re.X)


def blank(text):
    """text with comments, strings and preprocessor lines blanked (newlines kept: lines stay)."""
    return TOKEN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def split_params(inside):
    """The top-level comma-separated parts of a parameter list."""
    parts, depth, cur = [], 0, []
    for ch in inside:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    parts = [p.strip() for p in parts]
    if parts in ([""], ["void"]):
        return []
    return parts


NAME_BEFORE_PAREN = re.compile(r"([A-Za-z_]\w*)\s*$")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else"}


def definitions(text):
    """(line, name, parameter count) of each function defined at file scope in text."""
    s = blank(text)
    out, depth, i, n = [], 0, 0, len(s)
    while i < n:
        ch = s[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "(" and depth == 0:
            m = NAME_BEFORE_PAREN.search(s, 0, i)
            close, level = i, 0
            while close < n:  # the matching parenthesis
                level += s[close] == "("
                level -= s[close] == ")"
                if level == 0:
                    break
                close += 1
            rest = s[close + 1:close + 400].lstrip()
            # a definition: name(params) followed by its body (K&R declarations are not used)
            if m and m.group(1) not in KEYWORDS and rest.startswith("{"):
                line = s.count("\n", 0, m.start(1)) + 1
                out.append((line, m.group(1), len(split_params(s[i + 1:close]))))
            i = close
        i += 1
    return out


def c_files(dirs):
    for d in dirs:
        base = os.path.join(ROOT, d)
        if os.path.isfile(base):
            yield d
            continue
        for dirpath, _, names in os.walk(base):
            for name in sorted(names):
                if name.endswith(".c"):
                    yield os.path.relpath(os.path.join(dirpath, name), ROOT)


def offenders(path, text):
    """The "file:line name count" lines of the definitions in text (the source of path) that take
    more than MAX_PARAMS parameters, but for FIXED_SIGNATURES."""
    return [f"{path}:{line} {name} {count}" for line, name, count in definitions(text)
            if count > MAX_PARAMS and (path, name) not in FIXED_SIGNATURES]


def report_params(dirs):
    lines = []
    for path in sorted(set(c_files(dirs))):
        with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
            lines.extend(offenders(path, f.read()))
    return len(lines), lines


SELF_TEST_C = r"""
#define MACRO(a, b, c, d, e, f, g, h) (a)
static const char *text = "f(a, b, c, d, e, f, g, h) {";
/* g(a, b, c, d, e, f, g, h) { */
int none(void) { return 0; }
static int eight(int a, int b, int c, int d, int e, int f, int g,
                 int h) {
    if (a) { return b; }
    return sizeof(int);
}
void callback(void (*fn)(void *ctx, int x, int y, int z), void *ctx, int a, int b, int c, int d,
              int e) {}
int seven_decl(int a, int b, int c, int d, int e, int f, int g, int h);
struct s { int (*m)(int a, int b, int c, int d, int e, int f, int g, int h); };
"""


def self_test():
    """Checks definitions() and components() on small examples; returns the failures."""
    got = [(name, count) for _, name, count in definitions(SELF_TEST_C)]
    want = [("none", 0), ("eight", 8), ("callback", 7)]
    fails = [] if got == want else [f"definitions: {got} != {want}"]
    lines = [line for line, name, _ in definitions(SELF_TEST_C) if name == "eight"]
    if lines != [6]:
        fails.append(f"line of eight: {lines} != [6]")
    fixed = "int serve_answer(int a, int b, int c, int d, int e, int f, int g, int h) { return 0; }\n"
    got = offenders("cli/serve_request.c", SELF_TEST_C + fixed)
    if got != ["cli/serve_request.c:6 eight 8"]:
        fails.append(f"offenders (a fixed signature exempt, only there): {got}")
    got = offenders("cli/other.c", fixed)
    if got != ["cli/other.c:1 serve_answer 8"]:
        fails.append(f"offenders (the exemption names a file): {got}")
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    comps = sorted(c for c in components(graph) if len(c) > 1)
    if comps != [["a", "b", "c"]]:
        fails.append(f"components: {comps} != [['a', 'b', 'c']]")
    return fails


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        fails = self_test()
        for f in fails:
            print("self-test failed:", f)
        return 1 if fails else 0
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    build_dir, dirs = argv[1], [d.rstrip("/") for d in argv[2:]] or DEFAULT_DIRS
    ncycles, cycle_lines = report_cycles(build_dir, dirs)
    nfuncs, param_lines = report_params(dirs)
    for line in cycle_lines + param_lines:
        print(line)
    if cycle_lines or param_lines:
        print(f"check_structure: {ncycles} call cycles between files, {nfuncs} functions over "
              f"{MAX_PARAMS} parameters")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
