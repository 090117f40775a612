#!/usr/bin/env python3
"""check_pftrace.py - checks a Perfetto trace written by ktrace-decode
--format perfetto, from protoc's text output:

    protoc --proto_path=tests/perfetto/upstream \
        --decode=perfetto.protos.Trace perfetto_trace.proto < trace.pftrace > trace.txt
    python3 check_pftrace.py trace.txt

Independent of the decoder: it rebuilds what Perfetto's trace processor
would from the packets, and fails (exit 1, "FAIL: ..." on stderr) unless
  - every field is one Perfetto's own perfetto_trace.proto names (protoc
    prints the others by number);
  - the first packet makes CLOCK_REALTIME (1) the trace clock;
  - every sequence opens with SEQ_INCREMENTAL_STATE_CLEARED, a clock
    snapshot of the incremental clock 64, and defaults using it;
  - timestamps (deltas on clock 64 resolved) never go back on a sequence;
  - every name_iid was interned earlier on its sequence;
  - every event's track was described, and each track is written by one
    sequence only;
  - on every track, slices nest: an END closes an open BEGIN, nothing stays
    open at the end, and times strictly increase (so a viewer that orders
    events by time nests them exactly as written).
Then prints, one per line:
    slices <pid> <tid> <thread name> <slice name> <count>   (thread tracks)
    nest <pid> <tid> <parent slice or -> <slice name> <count> (thread tracks)
    process <pid> <name>
    track <parent pid> <name> <slices> <instants>           (other tracks)
    track <pid> tid=<tid> <name> <slices> <instants>        (tracks under a thread's)
    instant <pid> <tid> <name> <value annotation or -> <ns> (thread tracks)
    flow <tid> <slice> -> <tid> <event>  (every flow id starts once and
                                          ends once, not earlier)
    events <n>
    ok
"""
import sys
from collections import defaultdict


def parse(path):
    """protoc text format -> nested dicts of lists."""
    root = {}
    stack = [root]
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            s = line.strip()
            if not s:
                continue
            if s == "}":
                stack.pop()
                continue
            if s.endswith("{"):
                name = s[:-1].strip()
                if name.isdigit():
                    fail("message field %s is not in the .proto" % name)
                node = {}
                stack[-1].setdefault(name, []).append(node)
                stack.append(node)
                continue
            name, _, val = s.partition(":")
            val = val.strip()
            if name.strip().isdigit():
                # protoc prints a field its .proto does not name by number:
                # against Perfetto's own perfetto_trace.proto, none may be
                fail("field %s is not in the .proto (%s)" % (name.strip(), s))
            if val.startswith('"'):
                val = bytes(val[1:-1], "utf-8").decode("unicode_escape").encode(
                    "latin-1").decode("utf-8", "replace")
            stack[-1].setdefault(name.strip(), []).append(val)
    if len(stack) != 1:
        fail("unbalanced text")
    return root


def fail(msg):
    sys.stderr.write("FAIL: %s\n" % msg)
    sys.exit(1)


def one(node, key, default=None):
    v = node.get(key)
    return v[0] if v else default


def main():
    trace = parse(sys.argv[1])
    packets = trace.get("packet", [])
    if not packets:
        fail("no packets")
    cs = one(packets[0], "clock_snapshot")
    if not cs or one(cs, "primary_trace_clock") not in ("1", "BUILTIN_CLOCK_REALTIME"):
        fail("first packet does not make REALTIME the trace clock")

    seqs = {}          # id -> state
    tracks = {}        # uuid -> descriptor dict
    track_seq = {}     # uuid -> sequence id writing it
    stacks = defaultdict(list)
    last_t = {}        # track -> last timestamp
    slices = defaultdict(int)
    instants = defaultdict(int)
    nests = defaultdict(int)
    marks = []
    nevents = 0
    flows = {}         # flow id -> (track, name) of the event that starts it
    flow_end = {}      # flow id -> (track, name) of the event that ends it
    for i, p in enumerate(packets):
        sid = int(one(p, "trusted_packet_sequence_id", "0"))
        if sid == 0:
            fail("packet %d has no sequence id" % i)
        td = one(p, "track_descriptor")
        if td:
            tracks[int(one(td, "uuid"))] = td
        flags = int(one(p, "sequence_flags", "0"))
        if sid not in seqs:
            if sid != 1:
                if not flags & 1:
                    fail("sequence %d does not start with incremental state cleared" % sid)
                clocks = one(p, "clock_snapshot", {}).get("clocks", [])
                inc = [c for c in clocks if one(c, "clock_id") == "64"
                       and one(c, "is_incremental") == "true"]
                if not inc:
                    fail("sequence %d has no incremental clock 64" % sid)
                d = one(p, "trace_packet_defaults")
                if not d or one(d, "timestamp_clock_id") != "64":
                    fail("sequence %d defaults do not use clock 64" % sid)
                ted = one(d, "track_event_defaults", {})
                seqs[sid] = {"t64": int(one(inc[0], "timestamp")), "last": None,
                             "names": {}, "track": int(one(ted, "track_uuid", "0"))}
            else:
                seqs[sid] = {"t64": None, "last": None, "names": {}, "track": 0}
        st = seqs[sid]
        clock = one(p, "timestamp_clock_id")
        if clock is None and sid != 1:
            clock = "64"
        ts = one(p, "timestamp")
        if ts is None:
            fail("packet %d has no timestamp" % i)
        ts = int(ts)
        if clock == "64":
            st["t64"] += ts
            t = st["t64"]
        elif clock == "1":
            t = ts
        else:
            fail("packet %d uses clock %s" % (i, clock))
        if st["last"] is not None and t < st["last"]:
            fail("sequence %d goes back in time at packet %d (%d < %d)" % (sid, i, t, st["last"]))
        st["last"] = t
        idata = one(p, "interned_data")
        if idata:
            for en in idata.get("event_names", []):
                st["names"][int(one(en, "iid"))] = one(en, "name")
        te = one(p, "track_event")
        if not te:
            continue
        nevents += 1
        track = int(one(te, "track_uuid", str(st["track"])))
        if track not in tracks:
            fail("packet %d: event on undescribed track %d" % (i, track))
        if track_seq.setdefault(track, sid) != sid:
            fail("track %d written by sequences %d and %d" % (track, track_seq[track], sid))
        if track in last_t and t <= last_t[track]:
            fail("track %d: time does not increase at packet %d (%d after %d)"
                 % (track, i, t, last_t[track]))
        last_t[track] = t
        name = one(te, "name")
        iid = one(te, "name_iid")
        if iid is not None:
            if int(iid) not in st["names"]:
                fail("packet %d: name_iid %s not interned on sequence %d" % (i, iid, sid))
            name = st["names"][int(iid)]
        for fid in te.get("flow_ids", []):
            if fid in flows:
                fail("packet %d: flow %s started twice" % (i, fid))
            flows[fid] = (track, name, t)
        for fid in te.get("terminating_flow_ids", []):
            if fid in flow_end:
                fail("packet %d: flow %s ends twice" % (i, fid))
            flow_end[fid] = (track, name, t)
        typ = one(te, "type")
        if typ == "TYPE_SLICE_BEGIN":
            if name is None:
                fail("packet %d: slice without a name" % i)
            parent = stacks[track][-1][0] if stacks[track] else "-"
            nests[(track, parent, name)] += 1
            stacks[track].append((name, t))
            slices[(track, name)] += 1
        elif typ == "TYPE_SLICE_END":
            if not stacks[track]:
                fail("packet %d: END with no open slice on track %d" % (i, track))
            stacks[track].pop()
        elif typ == "TYPE_INSTANT":
            instants[(track, name)] += 1
            val = "-"
            for a in te.get("debug_annotations", []):
                if one(a, "name") == "value":
                    val = one(a, "uint_value", "-")
            marks.append((track, name, val, t))
        else:
            fail("packet %d: event type %s" % (i, typ))
    for track, stk in stacks.items():
        if stk:
            fail("track %d: %d slices never end (%s)" % (track, len(stk), stk[-1][0]))

    pids = {}
    for uuid, td in tracks.items():
        pr = one(td, "process")
        if pr:
            pids[uuid] = one(pr, "pid")
            print("process %s %s" % (one(pr, "pid"), one(pr, "process_name")))
    for (track, name), n in sorted(slices.items(), key=lambda x: (x[0][0], x[0][1])):
        td = tracks[track]
        th = one(td, "thread")
        if th:
            print("slices %s %s %s %s %d" % (one(th, "pid"), one(th, "tid"),
                                            one(th, "thread_name"), name, n))
    for (track, parent, name), n in sorted(nests.items()):
        th = one(tracks[track], "thread")
        if th:
            print("nest %s %s %s %s %d" % (one(th, "pid"), one(th, "tid"), parent, name, n))
    per_track = defaultdict(lambda: [0, 0])
    for (track, name), n in slices.items():
        per_track[track][0] += n
    for (track, name), n in instants.items():
        per_track[track][1] += n
    for track, (ns, ni) in sorted(per_track.items()):
        td = tracks[track]
        if one(td, "thread") is None:
            parent = int(one(td, "parent_uuid", "0"))
            pth = one(tracks.get(parent, {}), "thread")
            if pth:     # under a thread's track: "<pid> tid=<tid> <name>"
                print("track %s tid=%s %s %d %d" % (one(pth, "pid"), one(pth, "tid"),
                                                    one(td, "name"), ns, ni))
            else:
                print("track %s %s %d %d" % (pids.get(parent, "-"), one(td, "name"), ns, ni))
    for track, name, val, t in marks:
        th = one(tracks[track], "thread")
        if th:
            print("instant %s %s %s %s %d" % (one(th, "pid"), one(th, "tid"), name, val, t))
    for fid in flow_end:
        if fid not in flows:
            fail("flow %s ends but never starts" % fid)
    for fid, (track, name, t1) in sorted(flows.items()):
        if fid not in flow_end:
            fail("flow %s from %s never ends" % (fid, name))
        t2, n2, te2 = flow_end[fid]
        if te2 < t1:
            fail("flow %s ends (%d) before it starts (%d)" % (fid, te2, t1))
        a, b = one(tracks[track], "thread") or {}, one(tracks[t2], "thread") or {}
        pa = one(tracks.get(int(one(tracks[track], "parent_uuid", "0")), {}), "thread") or a
        pb = one(tracks.get(int(one(tracks[t2], "parent_uuid", "0")), {}), "thread") or b
        print("flow %s %s -> %s %s" % (one(pa, "tid", "-"), name, one(pb, "tid", "-"), n2))
    print("events %d" % nevents)
    print("ok")


main()
