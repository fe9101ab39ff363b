"""Shared by the scripts that split perf samples by method
(javac-perf.sh, jetty-perf.sh): the methods of a profile's tree, the
method a JIT symbol names, and the rows of `perf report -F sample,sym`."""
import collections
import json
import re


def tree_methods(report_path):
    """`pkg.Class.method` of every node of a sprig JSON report."""
    out = set()

    def walk(n):
        out.add(n['class'] + '.' + n['method'])
        for c in n.get('children', []):
            walk(c)

    for t in json.load(open(report_path))['threads']:
        for n in t['roots']:
            walk(n)
    return out


def method(sym):
    """`pkg.Class.method` of a JIT symbol ("Ret pkg.Class.method(args)"),
    None for any other symbol (HotSpot's runtime, stubs, the kernel)."""
    for p in sym.split(' ')[:3]:
        head = p.split('(')[0]
        if '(' in p and '.' in head:
            return head
    return None


def rows(syms_path):
    """(samples, kind, symbol) of each line of a `perf report --sort sym
    -F sample,sym` listing; kind is 'k' for the kernel, '.' for user."""
    for line in open(syms_path):
        m = re.match(r'\s*(\d+)\s+\[(.)\]\s+(.*)', line)
        if m:
            yield int(m.group(1)), m.group(2), m.group(3)


def split(path, tree, prefixes, runtime, kernel=None):
    """Samples of a listing by group, and by method: the probe class's
    own methods, the tree's, then the first of `prefixes` ((prefix, group)
    pairs) that a method starts with, else 'JDK and other'; symbols that
    name no method go to `runtime`, the kernel's to `kernel` when given."""
    groups, methods = collections.Counter(), collections.Counter()
    for n, kind, sym in rows(path):
        if kernel is not None and kind == 'k':
            groups[kernel] += n
            continue
        meth = method(sym)
        if meth is None:
            groups[runtime] += n
            continue
        methods[meth] += n
        if meth.startswith('sprig.rt.'):
            groups['sprig probe class (calls not inlined)'] += n
        elif meth in tree:
            groups['methods in the tree'] += n
        else:
            group = next((g for p, g in prefixes if meth.startswith(p)), 'JDK and other')
            groups[group] += n
    return groups, methods
