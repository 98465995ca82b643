#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_fuse (tests/fuzz/corpus/fuse/): short
programs in fuzz_fuse.c's encoding (see step() there) that reach each
handler along a path a kernel would take: look a region up, create a key,
write, flush, release, reopen, read, list, rename, unlink, truncate, the
virtual files, and the refusals (mkdir, symlink, link, a read-only
region). Run it again after changing the encoding."""
import os
import struct
import sys

OP = dict(LOOKUP=0, FORGET=1, GETATTR=2, SETATTR=3, MKNOD=4, MKDIR=5,
          UNLINK=6, RMDIR=7, RENAME=8, RENAME2=9, OPEN=10, CREATE=11,
          READ=12, WRITE=13, FLUSH=14, RELEASE=15, FSYNC=16, OPENDIR=17,
          READDIR=18, RELEASEDIR=19, FSYNCDIR=20, STATFS=21, SYMLINK=22,
          LINK=23, BATCH_FORGET=24)
DICT = ["a", "b", "c", ".regionfs", "stats", "config", "metrics.prom",
        "regions", "k0", "k1", "k2", "k3", ".hidden", "x y", "\xff\xfe"]


def name(n):
    """A dictionary name by its text."""
    return bytes([DICT.index(n)])


def raw(s):
    b = s.encode() if isinstance(s, str) else s
    return bytes([200, len(b) - 1]) + b


ROOT = b"\x00"       # pick_node: n % 4 == 0 -> the root
NODE = b"\x01"       # the first looked-up node (or the only directory)
NODE2 = b"\x02"


def lookup(parent, nm):
    return bytes([OP["LOOKUP"]]) + parent + nm


def create(parent, nm, rdwr=1, flags=0):
    return bytes([OP["CREATE"], rdwr, flags]) + struct.pack(">H", 0o644) + parent + nm


def write(data_len, fill=0x41, off=0, big=False):
    return (bytes([OP["WRITE"], 0]) + off.to_bytes(3, "big") +
            bytes([data_len % 64, 0xff if big else 0]) +
            (bytes([1]) if big else b"") + bytes([fill]))


def simple(op, pick=0):
    return bytes([OP[op], pick])


def open_(node, acc=0, flags=0):
    return bytes([OP["OPEN"], acc, flags]) + node


def read(off=0, size=4096):
    return bytes([OP["READ"], 0]) + off.to_bytes(3, "big") + struct.pack(">H", size)


def opendir(node):
    return bytes([OP["OPENDIR"]]) + node


def readdir(off=0, size=4096):
    return bytes([OP["READDIR"], 0, off]) + struct.pack(">H", size)


def rename(p1, n1, p2, n2):
    return bytes([OP["RENAME"]]) + p1 + p2 + n1 + n2


def setattr_size(node, size):
    valid = 1 << 3  # FATTR_SIZE
    return (bytes([OP["SETATTR"]]) + struct.pack(">H", valid) +
            size.to_bytes(3, "big") + b"\x00\x00" + b"\x00" + b"\x00" +
            b"\x00\x00\x00\x00" + b"\x00" + b"\x00" + node)


seeds = {
    "create_write_read": lookup(ROOT, name("a")) + create(NODE, name("k0")) +
    write(40) + simple("FLUSH") + simple("RELEASE") + lookup(NODE, name("k0")) +
    open_(NODE2) + read() + simple("RELEASE"),
    "list_region": lookup(ROOT, name("a")) + create(NODE, name("k1")) +
    simple("FLUSH") + simple("RELEASE") + opendir(NODE) + readdir() +
    readdir(2) + simple("RELEASEDIR"),
    "list_root": opendir(ROOT) + readdir() + simple("RELEASEDIR"),
    "rename_unlink": lookup(ROOT, name("a")) + create(NODE, name("k2")) +
    write(10) + simple("RELEASE") + rename(NODE, name("k2"), NODE, name("k3")) +
    bytes([OP["UNLINK"]]) + NODE + name("k3"),
    "virtual_stats": lookup(ROOT, name(".regionfs")) + lookup(NODE, name("stats")) +
    open_(NODE2) + read(0, 65535) + simple("RELEASE") + simple("STATFS"),
    "truncate": lookup(ROOT, name("a")) + create(NODE, name("k0")) + write(60) +
    simple("FLUSH") + simple("RELEASE") + lookup(NODE, name("k0")) +
    setattr_size(NODE2, 5) + bytes([OP["GETATTR"], 0]) + NODE2,
    "refusals": bytes([OP["MKDIR"], 0, 0o7, 0]) + ROOT + raw("newdir") +
    lookup(ROOT, name("c")) + create(NODE, name("k0")) +
    bytes([OP["SYMLINK"]]) + NODE + name("k1") + raw("target") +
    bytes([OP["MKNOD"], 0x11, 0xa4, 1]) + NODE + name("k2"),
    "too_big": lookup(ROOT, name("b")) + create(NODE, name("k0")) +
    write(60, big=True) + simple("FLUSH") + simple("FSYNC") + simple("RELEASE"),
    "odd_names": lookup(ROOT, name("a")) + create(NODE, raw("\x01\x7f ok")) +
    simple("RELEASE") + create(NODE, raw(b"\xff" * 200)) + simple("RELEASE") +
    opendir(NODE) + readdir() + simple("RELEASEDIR"),
    "forget": lookup(ROOT, name("a")) + lookup(NODE, name("k0")) +
    bytes([OP["FORGET"], 0, 0]) + bytes([OP["BATCH_FORGET"], 0]),
}

out = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "corpus", "fuse")
os.makedirs(out, exist_ok=True)
for k, v in seeds.items():
    with open(os.path.join(out, k), "wb") as f:
        f.write(v)
print(f"{len(seeds)} seeds in {out}")
