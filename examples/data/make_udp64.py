#!/usr/bin/env python3
"""Writes udp64.pcap: 4 Ethernet/IPv4/UDP frames of 64 bytes (without FCS),
02:00:00:00:00:01 -> 02:00:00:00:00:02, 10.0.0.1:1024+i -> 10.0.0.2:5001,
with valid IPv4 and UDP checksums. Classic pcap, link type 1 (Ethernet)."""
import os
import struct


def csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(i: int) -> bytes:
    src_ip, dst_ip = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    payload = bytes([i]) * (64 - 14 - 20 - 8)
    udp_len = 8 + len(payload)
    pseudo = src_ip + dst_ip + struct.pack("!BBH", 0, 17, udp_len)
    udp = struct.pack("!HHHH", 1024 + i, 5001, udp_len, 0) + payload
    udp_csum = csum(pseudo + udp) or 0xFFFF
    udp = udp[:6] + struct.pack("!H", udp_csum) + udp[8:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, i, 0x4000, 64, 17, 0, src_ip, dst_ip)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    eth = bytes.fromhex("020000000002") + bytes.fromhex("020000000001") + struct.pack("!H", 0x0800)
    return eth + ip + udp


def main() -> None:
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "udp64.pcap")
    with open(out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i in range(4):
            data = frame(i)
            assert len(data) == 64
            f.write(struct.pack("<IIII", 1_700_000_000, i, len(data), len(data)))
            f.write(data)


if __name__ == "__main__":
    main()
