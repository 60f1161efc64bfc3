"""The distributed runtime's failures: the rendezvous port taken, ranks that cannot reach
each other (at the rendezvous or in a collective), NCCL's other errors.

Rules of `monitoring.diagnosis.rules.RULES`, in the order they sit there: the port clash
first (c10d says it as a network error), then the network's errors and timeouts, then
whatever else NCCL reports.
"""

import re

from jobs.enums import FailureClass
from monitoring.diagnosis.clues import Clue, Rule, clues, failed
from monitoring.diagnosis.log_scan import WINDOW_LINES as WINDOW

# A distributed-runtime context (NCCL, c10d, gloo, the TCP store) and the network errno
# phrases in the wordings libc, NCCL, gloo and c10d print them.
_DISTRIBUTED = re.compile(
    r"NCCL|nccl|c10d|ProcessGroup|[Pp]rocess group|[Gg]loo|TCPStore|DistBackendError"
    r"|DistNetworkError|DistStoreError|torch\.distributed|[Rr]endezvous|NET/(?:IB|OFI|Socket)"
    r"|The (?:client|server) socket has"
)
_NETWORK = (
    r"Connection reset by peer|Broken pipe|No route to host|Connection refused"
    r"|Connection timed out|Connection closed by (?:remote )?peer|Connection aborted"
    r"|Software caused connection abort|Network is unreachable|Host is unreachable"
    r"|Name or service not known|Temporary failure in name resolution|network error"
    r"|Cannot assign requested address"
    r"|errno: (?:32|99|101|104|110|111|113)\b|\b(?:ECONNRESET|ECONNREFUSED|ETIMEDOUT"
    r"|EHOSTUNREACH|ENETUNREACH|EPIPE)\b|Got completion from peer|completed with error"
)
_TIMED_OUT = (
    r"[Tt]imed out|[Tt]ime ?out (?:after|at|of|while|waiting)\b|[Tt]imeout(?:Error|Exception)?: "
)

NCCL_FIXES = (
    "Check that MASTER_ADDR and MASTER_PORT are the same on every node and that MASTER_ADDR "
    "resolves and is reachable from every node (ping it, `nc -z $MASTER_ADDR $MASTER_PORT`).",
    "Open the firewall between the nodes for the rendezvous port and NCCL's ports "
    "(or allow all traffic on the cluster network).",
    "Make every node's hostname resolve to its cluster-network address: check /etc/hosts "
    "(a hostname mapped to 127.0.1.1 breaks multi-node jobs).",
    "Rerun with NCCL_DEBUG=INFO (and TORCH_DISTRIBUTED_DEBUG=DETAIL) to see which rank and "
    "which interface hang.",
    "Pin the network interface with NCCL_SOCKET_IFNAME (e.g. NCCL_SOCKET_IFNAME=ib0 or eth0) "
    "when nodes have several.",
    "If one rank is simply slower (data loading, a sick GPU), look for a straggler on the job "
    "page; raise the collective timeout only as a last resort.",
)

ADDRESS_IN_USE = Rule(
    FailureClass.ADDRESS_IN_USE,
    "Rendezvous port in use",
    "The rendezvous port (MASTER_PORT) was already taken on the first node, often by "
    "another job on the same node or a leftover process of an earlier run.",
    (
        "Pick a MASTER_PORT derived from the job id (the portal's batch script does: "
        "15000 + job id mod 15000) rather than a fixed one like 29500.",
        "Kill leftover training processes on the node, or wait for them to end.",
        "Give every node the same MASTER_PORT (torchrun --rdzv_endpoint=$MASTER_ADDR:"
        "$MASTER_PORT), unique per job, not a port per node.",
    ),
    # Before the NCCL rule: c10d says it as a DistNetworkError.
    patterns=clues(r"EADDRINUSE|[Aa]ddress already in use|errno: 98\b"),
    # c10d's TCPStore warns once per address it cannot bind (`[W socket.cpp:401] [c10d]
    # The server socket has failed to bind to 0.0.0.0:6021 (errno: 98 - Address already
    # in use).`, beside IPv6's harmless errno 97), then gives up in an error line that
    # names no errno: that line, when a bind above it failed for the port being taken
    # and no exception says so.
    weaker=(
        Clue(
            re.compile(r"The server socket has failed to listen on any local network address"),
            context=re.compile(r"EADDRINUSE|[Aa]ddress already in use|errno: 98\b"),
            before=WINDOW,
        ),
    ),
    when=failed,
)

NCCL_TIMEOUT = Rule(
    FailureClass.NCCL_TIMEOUT,
    "NCCL timeout",
    "The ranks could not reach each other in time: at the rendezvous (torchrun's or the "
    "TCP store's, on MASTER_ADDR:MASTER_PORT) a node did not connect, or in a collective "
    "operation a rank could not reach the others, hung, or was far slower (the NCCL "
    "watchdog then ended the job).",
    NCCL_FIXES,
    patterns=(
        *clues(
            r"Watchdog caught collective operation timeout",
            # The rendezvous: torchrun's errors, the TCP store's and its barrier's timeouts
            # (`DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients
            # joined.`, `Socket Timeout`), torch 1.x's `connect() timed out`.
            r"Rendezvous(?:Timeout|Connection)Error\b",
            r"DistStoreError\b",
            r"connect\(\) timed out\. Original timeout was",
            # c10d's client giving up on every address of the store (the errno, often
            # 110, is in the warnings above it).
            r"The client socket has failed to connect to any network address",
            r"ncclSystemError: System call \(e\.g\. socket, malloc\) or external library "
            r"call failed",
            r"DistNetworkError\b",
            r"The client socket has timed out after \d+m?s while trying to connect",
            r"Timed out waiting \d+ms for recv operation to complete",
        ),
        # A timeout or a network errno phrase, said by (or just under) the distributed
        # runtime: `NCCL WARN Net : Call to recv ... failed : Broken pipe`, c10d's
        # `RuntimeError: Connection reset by peer` under a distributed_c10d.py frame.
        Clue(re.compile(_TIMED_OUT), context=_DISTRIBUTED),
        # ncclSystemError as torch reports it: a socket call failed (the errno follows).
        Clue(re.compile(r"unhandled system error"), context=_DISTRIBUTED),
        Clue(re.compile(_NETWORK), context=_DISTRIBUTED, before=WINDOW),
    ),
    echo_of_kill=True,
)

NCCL_ERROR = Rule(
    FailureClass.NCCL_TIMEOUT,
    "NCCL error",
    "NCCL, the library the ranks exchange tensors with, failed for a reason other than "
    "the network (an internal error, an invalid use, a CUDA error inside NCCL): usually "
    "the set-up of the GPUs or the nodes (peer-to-peer between GPUs, /dev/shm, two ranks "
    "on one GPU, different NCCL versions), not the training code.",
    (
        "Rerun with NCCL_DEBUG=INFO (or WARN): the first `NCCL WARN` line names the call "
        "that failed.",
        "Give every rank its own GPU (torch.cuda.set_device(local_rank) before "
        "init_process_group); an invalid usage is often two ranks on one GPU.",
        "Try NCCL_P2P_DISABLE=1 (or NCCL_SHM_DISABLE=1) to see whether GPU peer-to-peer or "
        "shared memory is the cause, and check /dev/shm on the node.",
        "Use the same torch and NCCL on every node; if it happens on one node only, "
        "exclude it when restarting.",
    ),
    # After the timeout rule, which reads the network's errors: torch's DistBackendError
    # (`NCCL error in: ProcessGroupNCCL.cpp:3376, internal error - please report this
    # issue to the NCCL developers`), the watchdog's `NCCL error: ...`, the result codes.
    patterns=clues(
        r"\bNCCL error(?: in)?: ",
        r"\bnccl(?:InternalError|InvalidUsage|InvalidArgument|UnhandledCudaError)\b",
    ),
    when=failed,
    echo_of_kill=True,
)
