import { accountNameRule } from './accounts.js';
import { issueKey } from './auth/api-keys.js';
import { loadConfig } from './config.js';
import { openStorage } from './storage/index.js';
import type { Storage } from './storage/types.js';

class UsageError extends Error {}

type Out = (line: string) => void;

interface Command {
  /** The one argument it takes, as the usage names it (`<name>`); none when left out. */
  parameter?: string;
  summary: string;
  /** Checks the argument before the database is opened: a usage error leaves the database untouched. */
  check?: (argument: string) => void | Promise<void>;
  /** `argument` is empty for a command without a parameter. */
  run: (storage: Storage, out: Out, argument: string) => Promise<void>;
}

async function requireAccount(storage: Storage, name: string) {
  const account = await storage.accounts.findAccount(name);
  if (account === undefined)
    throw new Error(`no account named "${name}": create it with "petstore accounts create ${name}"`);
  return account;
}

const KEY_ID = /^[1-9][0-9]*$/;

const COMMANDS: Record<string, Command> = {
  'accounts create': {
    parameter: '<name>',
    summary: 'create an account',
    check: async (name) => {
      const rule = await accountNameRule();
      if (!rule.accepts(name)) throw new UsageError(`<name> must be ${rule.words}; got ${JSON.stringify(name)}`);
    },
    run: async (storage, out, name) => {
      if ((await storage.accounts.findAccount(name)) !== undefined) throw new Error(`account "${name}" already exists`);
      const account = await storage.accounts.createAccount(name);
      out(`created account ${account.name} (id ${account.id})`);
    },
  },
  'keys create': {
    parameter: '<account>',
    summary: 'create an API key for an account (the key is the last line printed)',
    run: async (storage, out, name) => {
      const account = await requireAccount(storage, name);
      const { key, info } = await issueKey(storage.accounts, account.id);
      out(`created key ${info.id} (${info.prefix}...) for account ${account.name}; it is shown only now:`);
      out(key);
    },
  },
  'keys list': {
    parameter: '<account>',
    summary: "list an account's keys (prefixes only: keys are stored as hashes)",
    run: async (storage, out, name) => {
      const account = await requireAccount(storage, name);
      const keys = await storage.accounts.listKeys(account.id);
      out('id\tprefix\tcreated\trevoked');
      for (const key of keys) out(`${key.id}\t${key.prefix}...\t${key.createdAt}\t${key.revokedAt ?? '-'}`);
    },
  },
  'keys revoke': {
    parameter: '<key-id>',
    summary: 'revoke a key; the next request with it gets 401',
    check: (id) => {
      if (!KEY_ID.test(id) || !Number.isSafeInteger(Number(id))) {
        throw new UsageError('<key-id> must be a key id from "petstore keys list"');
      }
    },
    run: async (storage, out, id) => {
      if (!(await storage.accounts.revokeKey(Number(id)))) throw new Error(`no key with id ${id}`);
      out(`revoked key ${id}`);
    },
  },
  migrate: {
    summary: 'apply the database migrations, then exit (the server also does at start)',
    // Opening the storage applied them.
    run: async (storage, out) => {
      const applied = storage.migrationsApplied;
      out(
        applied === 0
          ? 'nothing to apply: the database schema was up to date'
          : `applied ${applied} migration${applied === 1 ? '' : 's'}: the database schema is up to date`,
      );
    },
  },
};

const USAGE = [
  'Usage: petstore <command>',
  '',
  ...Object.entries(COMMANDS).map(([name, { parameter, summary }]) => {
    const synopsis = parameter === undefined ? name : `${name} ${parameter}`;
    return `  ${synopsis.padEnd(23)}  ${summary}`;
  }),
  '',
  'The database is DATABASE_URL (default ./data/petstore.db, or a postgres:// URL), as for the server.',
].join('\n');

/** The words a command is named by (`migrate`, `keys create`), and what follows them. */
function commandOf(args: string[]): [string, Command, string[]] {
  for (const [name, command] of Object.entries(COMMANDS)) {
    const words = name.split(' ');
    if (words.every((word, at) => args[at] === word)) return [name, command, args.slice(words.length)];
  }
  const [noun] = args;
  if (noun === 'accounts' || noun === 'keys')
    throw new UsageError(`"${args.join(' ')}": see the ${noun} commands below`);
  throw new UsageError(noun === undefined ? 'missing command' : `unknown command "${args.join(' ')}"`);
}

/** The command and its argument; a usage error for a missing argument or any beyond it. */
function parse(args: string[]): [Command, string] {
  const [name, command, given] = commandOf(args);
  const { parameter } = command;
  const takes = parameter === undefined ? 0 : 1;
  if (given.length > takes) {
    const what = parameter === undefined ? 'no arguments' : `one argument, ${parameter}`;
    const shown = given.map((argument) => JSON.stringify(argument)).join(' ');
    const hint = parameter === undefined ? '' : ' (quote one that has spaces)';
    throw new UsageError(`"${name}" takes ${what}, but was given ${given.length}: ${shown}${hint}`);
  }
  const option = given.find((argument) => argument.startsWith('-'));
  // No command takes options: `accounts create --help` would otherwise make an account named --help.
  if (option !== undefined) throw new UsageError(`"${name}" takes no options; got ${JSON.stringify(option)}`);
  const [argument = ''] = given;
  if (given.length < takes) throw new UsageError(`missing ${parameter}`);
  return [command, argument];
}

export async function main(args: string[]): Promise<number> {
  if (args.length === 0 || args[0] === '--help' || args[0] === '-h') {
    process.stdout.write(`${USAGE}\n`);
    return args.length === 0 ? 2 : 0;
  }
  let storage: Storage | undefined;
  try {
    const [command, argument] = parse(args);
    await command.check?.(argument);
    storage = await openStorage(loadConfig().database);
    await command.run(storage, (line) => process.stdout.write(`${line}\n`), argument);
    return 0;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`petstore: ${message}\n${error instanceof UsageError ? `\n${USAGE}\n` : ''}`);
    return error instanceof UsageError ? 2 : 1;
  } finally {
    await storage?.close();
  }
}
