// The market simulation of Redis in Action §6.2: sellers list items on a market (a sorted set) and buyers buy
// them, moving funds between users' hashes and items into the buyer's inventory. Three variants:
//   watch          the book's first version: WATCH the market and the buyer, check, MULTI/EXEC, retry when a
//                  watched key changed (optimistic; every listing and purchase changes the market key)
//   coarse lock    one lease for the whole market around each listing and purchase (no WATCH)
//   lock per item  one lease per listed item (no WATCH)
// Each trader has its own connection; all run concurrently in this process for a fixed time.
import { createClient, WatchError } from "redis";
import { withLock } from "../../mod.ts";

type Client = ReturnType<typeof createClient>;

export const VARIANTS = ["watch", "coarse lock", "lock per item"] as const;
export type Variant = typeof VARIANTS[number];

export interface MarketConfig {
  readonly sellers: number;
  readonly buyers: number;
  readonly seconds: number;
}

export interface MarketResult {
  readonly variant: Variant;
  readonly listings: number;
  readonly purchases: number;
  /** Purchases that found the item gone (another buyer was first). */
  readonly misses: number;
  /** WATCH transactions that had to be retried (listings and purchases). */
  readonly retries: number;
  readonly retriesPerPurchase: number;
  readonly purchaseP50Ms: number;
  readonly purchaseP99Ms: number;
  /** Funds conserved and every purchase's item in exactly one buyer inventory. */
  readonly consistent: boolean;
}

const FUNDS = 1_000_000_000;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function pct(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

export async function runMarket(
  url: string,
  ns: string,
  variant: Variant,
  c: MarketConfig,
  progress: (fraction: number, purchases: number) => void,
): Promise<MarketResult> {
  const base = `${ns}:market:${variant.replaceAll(" ", "-")}`;
  const market = `${base}:market`;
  const user = (id: string) => `${base}:users:${id}`;
  const inventory = (id: string) => `${base}:inventory:${id}`;
  const prefix = `${base}:lease`;
  const sellers = Array.from({ length: c.sellers }, (_, i) => `s${i}`);
  const buyers = Array.from({ length: c.buyers }, (_, i) => `b${i}`);
  const clients = new Map<string, Client>();
  for (const id of [...sellers, ...buyers]) {
    const client = createClient({ url });
    client.on("error", () => {});
    await client.connect();
    clients.set(id, client);
    await client.hSet(user(id), "funds", String(FUNDS));
    // Warm up the lease scripts on this connection.
    await withLock(client, `warmup:${id}`, () => {}, { prefix });
  }
  let listings = 0, purchases = 0, misses = 0, retries = 0, buyRetries = 0;
  const latencies: number[] = [];
  const lock = <T>(client: Client, name: string, fn: () => Promise<T>) =>
    withLock(client, name, fn, { prefix, waitMs: 30_000 });

  const listItem = async (client: Client, seller: string, item: string, price: number): Promise<boolean> => {
    const member = `${item}.${seller}`;
    const list = async () => {
      if (!await client.sIsMember(inventory(seller), item)) return false;
      await client.multi().zAdd(market, { score: price, value: member }).sRem(inventory(seller), item).exec();
      return true;
    };
    if (variant === "coarse lock") return await lock(client, "market", list);
    if (variant === "lock per item") return await lock(client, `market:${member}`, list);
    for (;;) {
      await client.watch(inventory(seller));
      if (!await client.sIsMember(inventory(seller), item)) {
        await client.unwatch();
        return false;
      }
      try {
        await client.multi().zAdd(market, { score: price, value: member }).sRem(inventory(seller), item).exec();
        return true;
      } catch (e) {
        if (!(e instanceof WatchError)) throw e;
        retries++;
      }
    }
  };

  const purchase = async (client: Client, buyer: string, member: string): Promise<boolean> => {
    const [item, seller] = member.split(".");
    const check = async (): Promise<number | null> => {
      const [price, funds] = await Promise.all([client.zScore(market, member), client.hGet(user(buyer), "funds")]);
      return price === null || Number(funds) < price ? null : price;
    };
    const buy = (price: number) =>
      client.multi()
        .hIncrBy(user(seller), "funds", price)
        .hIncrBy(user(buyer), "funds", -price)
        .sAdd(inventory(buyer), item)
        .zRem(market, member)
        .exec();
    const locked = async () => {
      const price = await check();
      if (price === null) return false;
      await buy(price);
      return true;
    };
    if (variant === "coarse lock") return await lock(client, "market", locked);
    if (variant === "lock per item") return await lock(client, `market:${member}`, locked);
    for (;;) {
      await client.watch([market, user(buyer)]);
      const price = await check();
      if (price === null) {
        await client.unwatch();
        return false;
      }
      try {
        await buy(price);
        return true;
      } catch (e) {
        if (!(e instanceof WatchError)) throw e;
        retries++;
        buyRetries++;
      }
    }
  };

  const t0 = performance.now();
  const end = t0 + c.seconds * 1_000;
  const ticker = setInterval(() => progress(Math.min(1, (performance.now() - t0) / (end - t0)), purchases), 100);
  const sellerLoop = async (seller: string) => {
    const client = clients.get(seller)!;
    for (let n = 0; performance.now() < end; n++) {
      const item = `${seller}-i${n}`; // unique across sellers
      await client.sAdd(inventory(seller), item);
      if (await listItem(client, seller, item, 1 + (n % 100))) listings++;
    }
  };
  const buyerLoop = async (buyer: string) => {
    const client = clients.get(buyer)!;
    while (performance.now() < end) {
      const member = await client.zRandMember(market);
      if (member === null) {
        await sleep(1);
        continue;
      }
      const start = performance.now();
      if (await purchase(client, buyer, member)) {
        purchases++;
        latencies.push(performance.now() - start);
      } else {
        misses++;
      }
    }
  };
  try {
    await Promise.all([...sellers.map(sellerLoop), ...buyers.map(buyerLoop)]);
  } finally {
    clearInterval(ticker);
  }
  progress(1, purchases);

  // Consistency: money is only moved, and each purchase put exactly one item into a buyer's inventory.
  const admin = clients.get(sellers[0])!;
  let funds = 0;
  let bought = 0;
  for (const id of [...sellers, ...buyers]) funds += Number(await admin.hGet(user(id), "funds"));
  for (const id of buyers) bought += await admin.sCard(inventory(id));
  const consistent = funds === FUNDS * (sellers.length + buyers.length) && bought === purchases;
  for (const client of clients.values()) await client.quit();
  latencies.sort((a, b) => a - b);
  return {
    variant,
    listings,
    purchases,
    misses,
    retries,
    retriesPerPurchase: purchases === 0 ? 0 : buyRetries / purchases,
    purchaseP50Ms: pct(latencies, 50),
    purchaseP99Ms: pct(latencies, 99),
    consistent,
  };
}
