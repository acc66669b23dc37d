import { issueKey } from './auth/api-keys.js';
import { loadConfig } from './config.js';
import { openStorage } from './storage/index.js';
import type { Storage } from './storage/types.js';

const USAGE = `Usage: petstore <command>

  accounts create <name>   create an account
  keys create <account>    create an API key for an account (the key is the last line printed)
  keys list <account>      list an account's keys (prefixes only: keys are stored as hashes)
  keys revoke <key-id>     revoke a key; the next request with it gets 401
  migrate                  apply the database migrations, then exit (the server also does at start)

The database is DATABASE_URL (default ./data/petstore.db, or a postgres:// URL), as for the server.`;

class UsageError extends Error {}

async function requireAccount(storage: Storage, name: string | undefined) {
  if (name === undefined) throw new UsageError('missing <account>');
  const account = await storage.accounts.findAccount(name);
  if (account === undefined)
    throw new Error(`no account named "${name}": create it with "petstore accounts create ${name}"`);
  return account;
}

async function run(storage: Storage, args: string[], out: (line: string) => void): Promise<void> {
  const [noun, verb, argument] = args;
  switch ([noun, verb].filter((word) => word !== undefined).join(' ')) {
    case 'migrate': {
      // Opening the storage applied them.
      const applied = storage.migrationsApplied;
      out(
        applied === 0
          ? 'nothing to apply: the database schema was up to date'
          : `applied ${applied} migration${applied === 1 ? '' : 's'}: the database schema is up to date`,
      );
      return;
    }
    case 'accounts create': {
      const name = argument?.trim();
      if (name === undefined || name === '' || name.length > 100)
        throw new UsageError('<name> must be 1 to 100 characters');
      if ((await storage.accounts.findAccount(name)) !== undefined) throw new Error(`account "${name}" already exists`);
      const account = await storage.accounts.createAccount(name);
      out(`created account ${account.name} (id ${account.id})`);
      return;
    }
    case 'keys create': {
      const account = await requireAccount(storage, argument);
      const { key, info } = await issueKey(storage.accounts, account.id);
      out(`created key ${info.id} (${info.prefix}...) for account ${account.name}; it is shown only now:`);
      out(key);
      return;
    }
    case 'keys list': {
      const account = await requireAccount(storage, argument);
      const keys = await storage.accounts.listKeys(account.id);
      out('id\tprefix\tcreated\trevoked');
      for (const key of keys) out(`${key.id}\t${key.prefix}...\t${key.createdAt}\t${key.revokedAt ?? '-'}`);
      return;
    }
    case 'keys revoke': {
      const id = Number(argument);
      if (argument === undefined || !/^[1-9][0-9]*$/.test(argument) || !Number.isSafeInteger(id)) {
        throw new UsageError('<key-id> must be a key id from "petstore keys list"');
      }
      if (!(await storage.accounts.revokeKey(id))) throw new Error(`no key with id ${id}`);
      out(`revoked key ${id}`);
      return;
    }
    default:
      if (noun === 'accounts' || noun === 'keys')
        throw new UsageError(`"${args.join(' ')}": see the ${noun} commands below`);
      throw new UsageError(noun === undefined ? 'missing command' : `unknown command "${args.join(' ')}"`);
  }
}

export async function main(args: string[]): Promise<number> {
  if (args.length === 0 || args[0] === '--help' || args[0] === '-h') {
    process.stdout.write(`${USAGE}\n`);
    return args.length === 0 ? 2 : 0;
  }
  let storage: Storage | undefined;
  try {
    storage = await openStorage(loadConfig().database);
    await run(storage, args, (line) => process.stdout.write(`${line}\n`));
    return 0;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`petstore: ${message}\n${error instanceof UsageError ? `\n${USAGE}\n` : ''}`);
    return error instanceof UsageError ? 2 : 1;
  } finally {
    await storage?.close();
  }
}
