// A small seeded pseudo-random generator (mulberry32), so that a run can be repeated from its seed: the chaos soak,
// the demo's sale plan (every process derives the same one) and bench/fuzz_set_paths.ts draw from it.

/** Numbers in [0, 1), the same sequence for the same `seed`. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
