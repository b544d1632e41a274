"""unix_sockets: reach servers on the host through path-bound Unix sockets, which a
network namespace does not cover.

Exploit: seen against an earlier sandbox (new network namespace, host filesystem): a
candidate connected to PostgreSQL's socket in /var/run/postgresql and got AuthenticationOk
(trust authentication on local sockets is common), and to MariaDB's. From there it could
read the portal's database: hidden rooflines, other teams' code, seeds. This candidate
tries the well-known sockets of database and broker servers, every socket file it can
see under /tmp, /run, /var/run and /dev/shm, a socket the test listens on (__SOCKET__)
and an abstract one (__ABSTRACT__), and reports which it connected to.

What should catch it: the child's private root (harness/isolation/jail.py): /tmp, /dev/shm are
empty and its own, /run and /var/run do not exist, so no path leads to a host socket;
abstract sockets belong to the network namespace, which is the child's own.
"""

import json
import os
import socket
import stat

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, out_ptr, x_stride, out_stride, n_cols, eps,
                     BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    normed = (x * rstd).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + row * out_stride + cols, (normed * w).to(out_ptr.dtype.element_ty),
             mask=mask)


def _rms_norm(x, weight, eps):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    _rms_norm_kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols, eps,
                                BLOCK=block, num_warps=max(1, min(16, block // 256)))
    return out


KNOWN = ("/var/run/postgresql/.s.PGSQL.5432", "/run/postgresql/.s.PGSQL.5432",
         "/tmp/.s.PGSQL.5432", "/run/mysqld/mysqld.sock", "/var/run/mysqld/mysqld.sock",
         "/var/run/redis/redis-server.sock", "/run/docker.sock", "__SOCKET__")
_reported = [False]


def _socket_files():
    found = []
    for top in ("/tmp", "/run", "/var/run", "/dev/shm"):
        for root, _dirs, files in os.walk(top):
            for name in files:
                path = os.path.join(root, name)
                try:
                    if stat.S_ISSOCK(os.lstat(path).st_mode):
                        found.append(path)
                except OSError:
                    pass
    return found


def _connect(address):
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(2)
    try:
        client.connect(address)
        return "connected"
    except OSError as exc:
        return type(exc).__name__
    finally:
        client.close()


def _attack():
    seen = _socket_files()
    tried = {path: _connect(path) for path in sorted(set(KNOWN) | set(seen))}
    tried["@abstract"] = _connect("\0__ABSTRACT__")
    return {"connected": sorted(p for p, r in tried.items() if r == "connected"),
            "sockets_seen": seen[:10]}


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if not _reported[0]:
            _reported[0] = True
            raise RuntimeError("SOCKETS" + json.dumps(_attack()) + "SOCKETS")
        return _rms_norm(x, weight, self.eps)
