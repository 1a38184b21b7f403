"""Scaffolding shared by the zarr-python interop scripts (zarr2_interop.py, n5_interop.py).

Cases that print one line each ("ok NAME" or "FAIL NAME REASON"), running the ndstore binary, .npy
round trips through `ndstore read` and `ndstore write`, and the command line every script takes:
SCRIPT NDSTORE_BINARY [FIXTURES_DIR] [-k SUBSTRING]. A script's main is run(argv, prog, tag, body):
body(fixtures) adds the cases; run prints "N passed, N failed" and returns the exit status.
Stdlib and numpy only; the state of a run (binary, temporary directory, counts) is module-level,
as a script is one run.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

import numpy as np

NDS = None     # the ndstore binary (argv[1])
TMP = None     # the temporary directory of this run, removed at its end
FILTER = None  # -k SUBSTRING: run only the cases whose name contains it
PASSED = 0
FAILED = 0


class CaseFail(Exception):
    """A case's check failed; the message is the reason printed after FAIL."""


def case(name, fn, *args):
    """Runs one case and prints its line. fn raises CaseFail (or anything) to fail."""
    global PASSED, FAILED
    if FILTER and FILTER not in name:
        return
    try:
        fn(*args)
    except CaseFail as e:
        FAILED += 1
        print('FAIL %s %s' % (name, str(e).replace('\n', ' | ')), flush=True)
        return
    except Exception as e:  # a bug in the test or an unexpected zarr-python error: still one line
        FAILED += 1
        tb = traceback.extract_tb(e.__traceback__)[-1]
        print('FAIL %s %s: %s (line %d)' % (name, type(e).__name__, str(e).replace('\n', ' | '),
                                            tb.lineno), flush=True)
        return
    PASSED += 1
    print('ok %s' % name, flush=True)


def newdir(tag):
    """A new directory under the run's temporary directory, named after tag."""
    return tempfile.mkdtemp(prefix=tag.replace('/', '_')[:40] + '-', dir=TMP)


def tmp_path(name):
    """name inside the run's temporary directory."""
    return os.path.join(TMP, name)


# ---- running ndstore ----------------------------------------------------------------------------

def nds(*args, timeout=120):
    """Runs ndstore; returns the CompletedProcess (text mode)."""
    cmd = [NDS] + [str(a) for a in args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CaseFail('timed out after %ds: %s' % (timeout, ' '.join(cmd)))


def describe(cmd_args, r):
    """One line saying how `ndstore cmd_args` ended (r its CompletedProcess) and what it said."""
    err = r.stderr.strip().replace('\n', ' | ')
    rc = r.returncode
    how = 'killed by signal %d' % -rc if rc < 0 else 'exit %d' % rc
    return '`ndstore %s` %s: %s' % (' '.join(str(a) for a in cmd_args), how, err[:400])


def nds_ok(*args):
    """Runs ndstore and fails the case unless it exits 0."""
    r = nds(*args)
    if r.returncode != 0:
        raise CaseFail(describe(args, r))
    return r


def nds_read(spec, region=None):
    """ndstore read SPEC [--region R] -o tmp.npy; returns the loaded array."""
    out = tmp_path('read-%d.npy' % os.getpid())
    args = ['read', spec, '-o', out] + (['--region', region] if region is not None else [])
    try:
        nds_ok(*args)
        return np.load(out)
    finally:
        if os.path.exists(out):
            os.unlink(out)


def nds_write(spec, arr, region=None):
    """np.save(arr), then ndstore write SPEC -i it [--region R] (byte order and layout kept)."""
    path = tmp_path('write-%d.npy' % os.getpid())
    np.save(path, arr)
    args = ['write', spec, '-i', path] + (['--region', region] if region is not None else [])
    try:
        nds_ok(*args)
    finally:
        os.unlink(path)


# The fixtures in this repository (tests/fixtures), used when the command line names no other folder.
DEFAULT_FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures')


# ---- a whole run --------------------------------------------------------------------------------

def run(argv, prog, tag, body):
    """Parses argv (prog NDSTORE_BINARY [FIXTURES_DIR] [-k SUBSTRING]; FIXTURES_DIR defaults to the
    repository's tests/fixtures), then runs body(fixtures) inside a new temporary directory
    nds-<tag>-interop-*; returns the exit status: 2 for a bad command line, 1 when a case failed."""
    global NDS, TMP, FILTER
    args = argv[1:]
    if '-k' in args:
        i = args.index('-k')
        FILTER = args[i + 1]
        del args[i:i + 2]
    if len(args) not in (1, 2):
        print('usage: %s NDSTORE_BINARY [FIXTURES_DIR] [-k SUBSTRING]' % prog, file=sys.stderr)
        return 2
    NDS = os.path.abspath(args[0])
    fixtures = os.path.abspath(args[1] if len(args) == 2 else DEFAULT_FIXTURES)
    if not os.access(NDS, os.X_OK):
        print('%s: %s is not an executable' % (prog, NDS), file=sys.stderr)
        return 2
    TMP = tempfile.mkdtemp(prefix='nds-%s-interop-' % tag)
    np.seterr(all='ignore')
    try:
        body(fixtures)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    print('%d passed, %d failed' % (PASSED, FAILED))
    return 1 if FAILED else 0
