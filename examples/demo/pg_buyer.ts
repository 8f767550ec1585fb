/**
 * One app server of the demo's PostgreSQL flash sale (examples/demo/main.ts starts several). Not meant to be run by hand.
 *
 *   node --import tsx examples/demo/pg_buyer.ts <redis url> <database url> <schema> <namespace> <index> <config json>
 *
 * Line protocol. stdout: `READY` once connected; during a run `PAUSE` just before this process stops itself
 * (SIGSTOP; the demo sends SIGCONT), then `RESULT <json of PgCounts>`. stdin: `RUN <mode>` serves this app
 * server's share of the requests in that mode (the app server that makes the run's first decision to sell pauses); `EXIT` closes and exits.
 */
import { writeSync } from "node:fs";
import process from "node:process";
import { createInterface } from "node:readline";
import pg from "pg";
import { createClient } from "redis";
import { PG_MODES, type PgMode, type PgSaleConfig, pgShare, servePg } from "./_pg_sale.ts";

const [url, dbUrl, schema, ns, index, json] = process.argv.slice(2);
if (!url || !dbUrl || !schema || !ns || index === undefined || !json) {
  console.error("usage: pg_buyer.ts <redis url> <database url> <schema> <namespace> <index> <config json>");
  process.exit(2);
}
try {
  const config = JSON.parse(json) as PgSaleConfig;
  const client = createClient({ url });
  client.on("error", (e) => console.error(`app server ${index}: ${e}`));
  await client.connect();
  const pool = new pg.Pool({
    connectionString: dbUrl,
    max: config.concurrency,
    options: `-c search_path=${schema}`,
  });
  pool.on("error", (e) => console.error(`app server ${index}: ${e.message}`));
  // Open the connections before the first run, so that the runs start hot.
  const warm = await Promise.all(Array.from({ length: config.concurrency }, () => pool.connect()));
  for (const c of warm) c.release();
  const users = pgShare(config, Number(index));
  // Written synchronously, so that the line is out before the SIGSTOP that follows `PAUSE`.
  const say = (line: string) => writeSync(1, `${line}\n`);

  const lines = createInterface({ input: process.stdin });
  say("READY");
  for await (const line of lines) {
    if (line === "EXIT") break;
    const mode = line.startsWith("RUN ") ? line.slice(4) as PgMode : undefined;
    if (!mode || !PG_MODES.includes(mode)) {
      console.error(`app server ${index}: unexpected line ${JSON.stringify(line)}`);
      process.exit(2);
    }
    const counts = await servePg(
      client,
      () => pool.connect(),
      mode,
      config,
      `${ns}:pgsale:${mode}`,
      users,
      () => say("PAUSE"),
    );
    say(`RESULT ${JSON.stringify(counts)}`);
  }
  await pool.end();
  await client.quit();
} catch (e) {
  console.error(`app server ${index}: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
}
process.exit(0);
