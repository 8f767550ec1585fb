// `redlease unlock NAME --force`: remove every hold of a stuck lease.
import { forceUnlock } from "../mod.ts";
import { flag, GLOBAL_OPTIONS, parseArgs, value } from "./_args.ts";
import { checkName, checkPrefix, CliError, EXIT, EXIT_CODES_HELP, timed, usage, write } from "./_common.ts";
import { close, connect, type RedisClient, resolveUrl } from "./_connect.ts";

export const UNLOCK_HELP = `Usage: redlease unlock NAME --force [options]

Remove every hold of every owner of the lease NAME: an operator's tool for a stuck lease. The fence record
is kept, so the next holder's token is still higher, and the lease is handed to the first live waiter, if
any. A holder running under 'redlease run' notices at its next renewal (within a third of its --lease),
stops its command and exits with code 4. Without --force nothing is done.

Options:
  --force          required: unlocking takes the lease away from a holder that may still be working
  --url URL        Redis URL (default: $REDIS_URL, else redis://localhost:6379)
  --prefix PREFIX  key prefix (default: redlease)
  -h, --help       show this help

Exit code 0 when the lease was held and is now removed, 1 when it was not held.

${EXIT_CODES_HELP}
`;

export async function unlockCommand(argv: readonly string[]): Promise<number> {
  const p = parseArgs("unlock", argv, { ...GLOBAL_OPTIONS, force: "flag" });
  if (flag(p, "help")) {
    await write("stdout", UNLOCK_HELP);
    return EXIT.OK;
  }
  const name = checkName("unlock", p.positionals[0]);
  if (p.positionals.length > 1) throw usage("unlock", `expected one NAME, got ${p.positionals.length}`);
  if (!flag(p, "force")) {
    throw usage("unlock", `refusing to unlock '${name}' without --force: it takes the lease from its holder`);
  }
  const prefix = checkPrefix("unlock", value(p, "prefix"));
  const url = resolveUrl("unlock", value(p, "url"));
  let client: RedisClient | undefined;
  try {
    client = await connect(url);
    const held = await timed(forceUnlock(client, name, { prefix }), "force-unlock the lease");
    if (!held) throw new CliError(`lease '${name}' was not held: nothing to unlock`, EXIT.NOT_HELD);
    await write("stdout", `unlocked '${name}'\n`);
    return EXIT.OK;
  } finally {
    await close(client);
  }
}
