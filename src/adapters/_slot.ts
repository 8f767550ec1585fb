// The Redis Cluster hash slot of a key: the repository's one CRC16. The ioredis adapter sends WAIT to the master of a
// key's slot with it; the node-redis cluster driver (src/_node_redis.ts) picks a key of a live master's slots with
// it, to have the client rediscover the slots; the test harness (harness/cluster.ts) finds which master owns
// a key with it. It lives in src/ because shipped code needs it, and src/ never imports from the harness.

const encoder = new TextEncoder();

/** CRC16-CCITT (XMODEM: poly 0x1021, init 0, no reflection), as Redis Cluster uses. */
export function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/**
 * The hash slot of `key` (a string is hashed as UTF-8): CRC16 of its hash tag — what lies between the first `{` and
 * the first `}` after it, when that is not empty — or else of the whole key, mod 16384.
 */
export function slotOf(key: string | Uint8Array): number {
  const bytes = typeof key === "string" ? encoder.encode(key) : key;
  const open = bytes.indexOf(0x7b); // {
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1); // }
    if (close > open + 1) return crc16(bytes.subarray(open + 1, close)) & 16383;
  }
  return crc16(bytes) & 16383;
}
