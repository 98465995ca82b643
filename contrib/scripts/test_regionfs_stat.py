#!/usr/bin/env python3
"""Unit tests of regionfs-stat on a fake .regionfs tree (no mount needed).

The watch loop is driven deterministically: time.sleep is replaced by a
function that advances a fake monotonic clock and applies the next change
to the tree, so every sample sees exactly the counters the test wrote.
The live test on a real mount is test_regionfs_stat.sh.

Run: python3 contrib/scripts/test_regionfs_stat.py [-v]
"""

import contextlib
import importlib.machinery
import importlib.util
import io
import os
import shutil
import sys
import tempfile
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
_loader = importlib.machinery.SourceFileLoader(
    "regionfs_stat", os.path.join(HERE, "regionfs-stat"))
_spec = importlib.util.spec_from_loader("regionfs_stat", _loader)
rs = importlib.util.module_from_spec(_spec)
_loader.exec_module(rs)

REGION_KEYS = ("gets", "hits", "misses", "evictions", "stale_puts_rejected",
               "entries", "bytes", "max_entries", "max_bytes")


class FakeMount:
    """MNT/.regionfs/{stats,config,regions/NAME/stats} in a temp dir."""

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="rfs-stat-test.")
        self.meta = os.path.join(self.root, ".regionfs")
        self.order = []
        self.mount(pid=100)

    def mount(self, pid):
        os.makedirs(os.path.join(self.meta, "regions"), exist_ok=True)
        self.write("stats", f"version 0.1.0\npid {pid}\nuptime_seconds 5\n")
        self.write_config()

    def unmount(self):
        shutil.rmtree(self.meta)

    def write(self, rel, text):
        path = os.path.join(self.meta, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    def write_config(self):
        lines = ["path /etc/regionfs/regions.ini", "generation 1",
                 "last_reload ok", "last_error"]
        lines += [f"region {n}" for n in self.order]
        self.write("config", "\n".join(lines) + "\n")

    def region(self, name, **values):
        if name not in self.order:
            self.order.append(name)
            self.write_config()
        st = {k: 0 for k in REGION_KEYS}
        st.update(values)
        gets = st["gets"]
        ratio = st["hits"] / gets if gets else 0
        text = f"region {name}\n" + "".join(
            f"{k} {v}\n" for k, v in st.items()) + f"hit_ratio {ratio:.4f}\n"
        self.write(os.path.join("regions", name, "stats"), text)

    def remove_region(self, name):
        self.order.remove(name)
        self.write_config()
        shutil.rmtree(os.path.join(self.meta, "regions", name))

    def cleanup(self):
        shutil.rmtree(self.root, ignore_errors=True)


def run_main(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = rs.main(argv)
        except SystemExit as e:
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def rows(text):
    """Table lines split into cells, without headers and '#' notes."""
    return [ln.split() for ln in text.splitlines()
            if ln and not ln.startswith(("REGION", "TIME", "#"))]


class Steps:
    """Fake clock: each sleep() advances it and applies the next step."""

    def __init__(self, steps):
        self.now = 1000.0
        self.steps = list(steps)

    def monotonic(self):
        return self.now

    def sleep(self, secs):
        self.now += secs
        if self.steps:
            self.steps.pop(0)()


class FormatTest(unittest.TestCase):
    def test_counts_are_exact_below_100000_then_si(self):
        self.assertEqual(rs.fmt_count(0), "0")
        self.assertEqual(rs.fmt_count(99999), "99999")
        self.assertEqual(rs.fmt_count(100000), "100k")
        self.assertEqual(rs.fmt_count(1234567), "1.2M")
        self.assertEqual(rs.fmt_count(999_600_000), "1.0G")

    def test_sizes_use_powers_of_1024_like_regions_ini(self):
        self.assertEqual(rs.fmt_size(1023), "1023")
        self.assertEqual(rs.fmt_size(1024), "1K")
        self.assertEqual(rs.fmt_size(1536), "1.5K")
        self.assertEqual(rs.fmt_size(256 << 20), "256M")
        self.assertEqual(rs.fmt_size(2 << 30), "2G")

    def test_rates_and_ratio(self):
        self.assertEqual(rs.fmt_rate(None), "-")
        self.assertEqual(rs.fmt_rate(0), "0")
        self.assertEqual(rs.fmt_rate(0.25), "0.2")
        self.assertEqual(rs.fmt_rate(563.4), "563")
        self.assertEqual(rs.fmt_rate(250000), "250k")
        self.assertEqual(rs.fmt_pct(0, 0), "-")
        self.assertEqual(rs.fmt_pct(9724, 10000), "97.2")
        # hits may run a little ahead of gets in one snapshot
        self.assertEqual(rs.fmt_pct(11, 10), "100.0")


class SnapshotTest(unittest.TestCase):
    def setUp(self):
        self.m = FakeMount()
        self.m.region("options", gets=1000, hits=990, misses=10,
                      evictions=3, stale_puts_rejected=2, entries=1843,
                      bytes=114688, max_entries=200000,
                      max_bytes=128 << 20)
        self.m.region("blobs", gets=0, entries=0, max_entries=0,
                      max_bytes=2 << 30)

    def tearDown(self):
        self.m.cleanup()

    def test_one_line_per_region_in_config_order(self):
        rc, out, err = run_main([self.m.root])
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out.splitlines()[0].split(),
                         ["REGION", "ENTRIES/MAX", "BYTES/MAX", "HIT%",
                          "GETS", "MISSES", "EVICT", "STALE"])
        self.assertEqual(rows(out), [
            ["options", "1843/200k", "112K/128M", "99.0", "1000", "10",
             "3", "2"],
            ["blobs", "0/-", "0/2G", "-", "0", "0", "0", "0"]])

    def test_region_filter_and_unknown_region(self):
        rc, out, _ = run_main(["-r", "blobs", self.m.root])
        self.assertEqual(rc, 0)
        self.assertEqual([r[0] for r in rows(out)], ["blobs"])
        rc, out, err = run_main(["-r", "nope", self.m.root])
        self.assertEqual((rc, out), (1, ""))
        self.assertIn("no region nope", err)
        self.assertIn("regions: options, blobs", err)

    def test_not_a_regionfs_mount(self):
        rc, _, err = run_main([os.path.dirname(self.m.root)])
        self.assertEqual(rc, 1)
        self.assertIn("is not a regionfs mount point", err)
        rc, _, err = run_main([os.path.join(self.m.root, "missing")])
        self.assertEqual(rc, 1)
        self.assertIn("cannot access", err)

    def test_usage_errors_exit_2(self):
        for argv in (["-i", "0"], ["-i", "x"], ["-c", "2"],
                     ["-i", "1", "-c", "0"], ["-i", "nan"]):
            rc, _, _ = run_main(argv + [self.m.root])
            self.assertEqual(rc, 2, argv)


class WatchTest(unittest.TestCase):
    def setUp(self):
        self.m = FakeMount()
        self.m.region("main", gets=100, hits=50, misses=50, entries=10,
                      max_entries=1000, max_bytes=1 << 20)

    def tearDown(self):
        self.m.cleanup()

    def watch(self, argv, steps):
        clock = Steps(steps)
        with mock.patch.object(rs.time, "monotonic", clock.monotonic), \
                mock.patch.object(rs.time, "sleep", clock.sleep), \
                mock.patch.object(rs.time, "strftime",
                                  lambda fmt: "12:00:00"):
            return run_main(argv + [self.m.root])

    def test_rates_are_per_second_over_the_interval(self):
        rc, out, err = self.watch(["-i", "2", "-c", "2"], [
            lambda: self.m.region("main", gets=300, hits=230, misses=70,
                                  evictions=4, stale_puts_rejected=1,
                                  entries=12, max_entries=1000,
                                  max_bytes=1 << 20),
            lambda: None])
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out.splitlines()[0].split()[:2], ["TIME", "REGION"])
        self.assertEqual(rows(out), [
            ["12:00:00", "main", "12/1000", "0/1M", "90.0", "100", "10.0",
             "2.0", "0.5"],
            ["12:00:00", "main", "12/1000", "0/1M", "-", "0", "0", "0",
             "0"]])

    def test_restart_shows_no_rates_for_one_interval(self):
        def restart():
            self.m.mount(pid=200)
            self.m.region("main", gets=5, hits=1, misses=4, entries=4,
                          max_entries=1000, max_bytes=1 << 20)

        rc, out, _ = self.watch(["-i", "1", "-c", "2"], [
            restart,
            lambda: self.m.region("main", gets=15, hits=11, misses=4,
                                  entries=4, max_entries=1000,
                                  max_bytes=1 << 20)])
        self.assertEqual(rc, 0)
        self.assertIn("# regionfs pid 200", out)
        self.assertEqual([r[4:] for r in rows(out)],
                         [["-", "-", "-", "-", "-"],
                          ["100.0", "10.0", "0", "0", "0"]])

    def test_counters_going_back_show_no_rates(self):
        rc, out, _ = self.watch(["-i", "1", "-c", "1"], [
            lambda: self.m.region("main", gets=3, hits=0, misses=3,
                                  max_entries=1000, max_bytes=1 << 20)])
        self.assertEqual(rc, 0)
        self.assertEqual(rows(out)[0][4:], ["-", "-", "-", "-", "-"])

    def test_regions_added_and_removed_by_a_reload(self):
        rc, out, _ = self.watch(["-i", "1", "-c", "2"], [
            lambda: self.m.region("sessions", gets=7, max_entries=5),
            lambda: self.m.remove_region("main")])
        self.assertEqual(rc, 0)
        self.assertEqual([(r[1], r[5]) for r in rows(out)],
                         [("main", "0"), ("sessions", "-"),
                          ("sessions", "0")])

    def test_unmount_is_noted_and_watching_goes_on(self):
        def remount():
            self.m.mount(pid=300)
            self.m.region("main", gets=1, max_entries=1000)

        rc, out, err = self.watch(["-i", "1", "-c", "2"], [
            self.m.unmount, remount,
            lambda: self.m.region("main", gets=4, hits=3, max_entries=1000)])
        self.assertEqual((rc, err), (0, ""))
        notes = [ln for ln in out.splitlines() if ln.startswith("#")]
        self.assertEqual(len(notes), 2, out)
        self.assertIn("not mounted", notes[0])
        self.assertIn("waiting", notes[0])
        self.assertIn("pid 300", notes[1])
        self.assertEqual([r[5] for r in rows(out)], ["-", "3.0"])

    def test_a_slow_sample_skips_ticks_instead_of_bursting(self):
        clock = Steps([])
        slept = []

        def sleep(secs):
            slept.append(secs)
            clock.now += secs

        with mock.patch.object(rs.time, "monotonic", clock.monotonic), \
                mock.patch.object(rs.time, "sleep", sleep):
            start = clock.now
            self.assertEqual(rs.next_tick(start, 1.0, 0), 1)
            clock.now += 3.5  # a sample that hung for 3.5 s
            self.assertEqual(rs.next_tick(start, 1.0, 1), 5)
        self.assertEqual(slept, [1.0, 0.5])


if __name__ == "__main__":
    unittest.main()
