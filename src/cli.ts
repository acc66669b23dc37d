import { parseArgs } from 'node:util';
import { issueKey } from './auth/api-keys.js';
import { loadConfig } from './config/environment.js';
import { openStorage } from './storage/index.js';
import type { ApiKeyInfo, KeyGrant, Storage } from './storage/types.js';

interface NameSchema {
  minLength: number;
  maxLength: number;
}

/** Which account names `petstore accounts create` takes, and the rule in words. */
interface AccountNameRule {
  accepts(name: string): boolean;
  words: string;
}

/**
 * Account names follow the contract's rule for pet names, checked by its NewPet.name schema itself:
 * 1 to 100 characters, not only white space, no control characters or unpaired surrogates. White
 * space at either end is refused too: an account is found by its name, typed again on the command
 * line, where such white space does not show.
 */
async function accountNameRule(): Promise<AccountNameRule> {
  // Loaded only when needed: the petstore commands that take no name do not pay for Ajv.
  const [{ loadContract }, { compileBodySchema }] = await Promise.all([
    import('./contract/document.js'),
    import('./plugins/validation.js'),
  ]);
  const { dereferenced } = await loadContract();
  const newPet = dereferenced.components?.schemas?.NewPet as { properties?: Record<string, object> } | undefined;
  const schema = newPet?.properties?.name;
  if (schema === undefined) throw new Error('the contract gives no schema for NewPet.name');
  const isPetName = compileBodySchema(schema);
  const { minLength, maxLength } = schema as NameSchema;
  return {
    accepts: (name) => isPetName(name) && name.trim() === name,
    words: `${minLength} to ${maxLength} characters, with no control characters and no white space at either end`,
  };
}

class UsageError extends Error {}

type Out = (line: string) => void;

/** The options a command was given, by name (`--scopes`). */
type Options = ReadonlyMap<string, string>;

interface Command {
  /** The one argument it takes, as the usage names it (`<name>`); none when left out. */
  parameter?: string;
  /** The options it takes, each with a value, as the usage names them (`--scopes LIST`). */
  options?: readonly string[];
  summary: string;
  /** Checks the argument and options before the database is opened: a usage error leaves the database untouched. */
  check?: (argument: string, options: Options) => void | Promise<void>;
  /** `argument` is empty for a command without a parameter. */
  run: (storage: Storage, out: Out, argument: string, options: Options) => Promise<void>;
}

async function requireAccount(storage: Storage, name: string) {
  const account = await storage.accounts.findAccount(name);
  if (account === undefined)
    throw new Error(`no account named "${name}": create it with "petstore accounts create ${name}"`);
  return account;
}

const KEY_ID = /^[1-9][0-9]*$/;

function checkKeyId(id: string): void {
  if (!KEY_ID.test(id) || !Number.isSafeInteger(Number(id))) {
    throw new UsageError('<key-id> must be a key id from "petstore keys list"');
  }
}

const DURATION = /^([1-9][0-9]{0,8})(s|m|h|d)$/;
const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `30s`, `15m`, `24h`, `90d` in milliseconds. */
function durationMs(option: string, text: string): number {
  const match = DURATION.exec(text);
  if (match === null) throw new UsageError(`${option} must be a duration such as 30s, 15m, 24h or 90d; got "${text}"`);
  return Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
}

// ISO 8601 with a date, a time and a zone: a time without a zone would be read in the machine's.
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;

/** When a new key expires, from `--expires-in` or `--expires-at` (not both); undefined: never. */
function expiryOf(options: Options, now = Date.now()): Date | undefined {
  const expiresIn = options.get('--expires-in');
  const expiresAt = options.get('--expires-at');
  if (expiresIn !== undefined && expiresAt !== undefined) {
    throw new UsageError('give --expires-in or --expires-at, not both');
  }
  if (expiresIn !== undefined) return new Date(now + durationMs('--expires-in', expiresIn));
  if (expiresAt === undefined) return undefined;
  const at = INSTANT.test(expiresAt) ? new Date(expiresAt) : undefined;
  if (at === undefined || Number.isNaN(at.getTime())) {
    throw new UsageError(
      `--expires-at must be an ISO 8601 time with its zone, such as 2027-01-31T00:00:00Z; got "${expiresAt}"`,
    );
  }
  if (at.getTime() <= now) throw new UsageError(`--expires-at ${expiresAt} is not in the future`);
  return at;
}

/** The scopes `--scopes` names (comma-separated), each one the contract's; undefined: every scope. */
async function scopesOf(options: Options): Promise<string[] | undefined> {
  const given = options.get('--scopes');
  if (given === undefined) return undefined;
  const { loadContract, scopesOf: contractScopes } = await import('./contract/document.js');
  const known = contractScopes((await loadContract()).dereferenced);
  const scopes = [...new Set(given.split(','))];
  const unknown = scopes.filter((scope) => !known.has(scope));
  if (unknown.length > 0 || scopes.length === 0) {
    throw new UsageError(
      `--scopes takes a comma-separated list of ${[...known.keys()].join(', ')}; ${unknown.map((scope) => JSON.stringify(scope)).join(', ')} is not one`,
    );
  }
  return scopes;
}

/** A new key's grant from the options: checked before the database is opened, read again when run. */
async function grantOf(options: Options): Promise<KeyGrant> {
  return { scopes: await scopesOf(options), expiresAt: expiryOf(options) };
}

const EXPIRY_OPTIONS = ['--expires-in DURATION', '--expires-at TIME'];

function describeKey(info: ApiKeyInfo): string {
  const scopes = info.scopes === null ? 'every scope' : `scopes ${info.scopes.join(',')}`;
  const expiry = info.expiresAt === null ? 'no expiry' : `expires ${info.expiresAt}`;
  return `${info.id} (${info.prefix}...), ${scopes}, ${expiry}`;
}

/** How long a rotated key stays valid beside its replacement, unless --grace says otherwise. */
const DEFAULT_GRACE = '24h';

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
    options: ['--scopes LIST', ...EXPIRY_OPTIONS],
    summary: 'create an API key for an account (the key is the last line printed)',
    check: async (_name, options) => {
      await grantOf(options);
    },
    run: async (storage, out, name, options) => {
      const account = await requireAccount(storage, name);
      const { key, info } = await issueKey(storage.accounts, account.id, await grantOf(options));
      out(`created key ${describeKey(info)} for account ${account.name}; it is shown only now:`);
      out(key);
    },
  },
  'keys list': {
    parameter: '<account>',
    summary: "list an account's keys (prefixes only: keys are stored as hashes)",
    run: async (storage, out, name) => {
      const account = await requireAccount(storage, name);
      const keys = await storage.accounts.listKeys(account.id);
      out('id\tprefix\tscopes\tcreated\texpires\trevoked');
      for (const key of keys) {
        const scopes = key.scopes?.join(',') ?? 'all';
        out(
          `${key.id}\t${key.prefix}...\t${scopes}\t${key.createdAt}\t${key.expiresAt ?? '-'}\t${key.revokedAt ?? '-'}`,
        );
      }
    },
  },
  'keys rotate': {
    parameter: '<key-id>',
    options: ['--grace DURATION', ...EXPIRY_OPTIONS],
    summary: `replace a key with a new one holding its scopes; the old one works --grace longer (default ${DEFAULT_GRACE})`,
    check: (id, options) => {
      checkKeyId(id);
      durationMs('--grace', options.get('--grace') ?? DEFAULT_GRACE);
      expiryOf(options);
    },
    run: async (storage, out, id, options) => {
      const old = await storage.accounts.findKey(Number(id));
      if (old === undefined) throw new Error(`no key with id ${id}`);
      if (old.revokedAt !== null) throw new Error(`key ${id} is revoked: create a new one with "petstore keys create"`);
      const grant = { scopes: old.scopes ?? undefined, expiresAt: expiryOf(options) };
      const { key, info } = await issueKey(storage.accounts, old.accountId, grant);
      const until = new Date(Date.now() + durationMs('--grace', options.get('--grace') ?? DEFAULT_GRACE));
      await storage.accounts.expireKey(old.id, until);
      const expires = (await storage.accounts.findKey(old.id))?.expiresAt ?? until.toISOString();
      out(
        `created key ${describeKey(info)} to replace key ${old.id}, which works until ${expires}; the new key is shown only now:`,
      );
      out(key);
    },
  },
  'keys revoke': {
    parameter: '<key-id>',
    summary: 'revoke a key; the next request with it gets 401',
    check: checkKeyId,
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
  ...Object.entries(COMMANDS).map(([name, { parameter, options = [], summary }]) => {
    const synopsis = [name, parameter, ...options.map((option) => `[${option}]`)].filter(Boolean).join(' ');
    return synopsis.length <= 23
      ? `  ${synopsis.padEnd(23)}  ${summary}`
      : `  ${synopsis}\n  ${''.padEnd(23)}  ${summary}`;
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

/**
 * The options among `given` (`--name value` or `--name=value`, read by node's parseArgs), each one
 * the command takes, once; and the rest. After `--`, everything is an argument.
 */
function optionsOf(name: string, command: Command, given: string[]): [Map<string, string>, string[]] {
  const takes = (command.options ?? []).map((option) => option.split(' ')[0] ?? '');
  const { tokens } = parseArgs({
    args: given,
    options: Object.fromEntries(takes.map((option) => [option.slice(2), { type: 'string' as const }])),
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  const options = new Map<string, string>();
  const rest: string[] = [];
  for (const token of tokens) {
    if (token.kind === 'positional') rest.push(token.value);
    if (token.kind !== 'option') continue;
    const option = token.rawName;
    // `accounts create --help` must not make an account named --help.
    if (!takes.includes(option)) {
      const which = takes.length === 0 ? 'takes no options' : `takes ${takes.join(', ')}`;
      throw new UsageError(`"${name}" ${which}; got ${JSON.stringify(option)}`);
    }
    if (token.value === undefined || token.value === '') throw new UsageError(`${option} needs a value`);
    if (options.has(option)) throw new UsageError(`${option} is given twice`);
    options.set(option, token.value);
  }
  return [options, rest];
}

/** The command, its argument and its options; a usage error for a missing argument or any beyond it. */
function parse(args: string[]): [Command, string, Options] {
  const [name, command, given] = commandOf(args);
  const [options, rest] = optionsOf(name, command, given);
  const { parameter } = command;
  const takes = parameter === undefined ? 0 : 1;
  if (rest.length > takes) {
    const what = parameter === undefined ? 'no arguments' : `one argument, ${parameter}`;
    const shown = rest.map((argument) => JSON.stringify(argument)).join(' ');
    const hint = parameter === undefined ? '' : ' (quote one that has spaces)';
    throw new UsageError(`"${name}" takes ${what}, but was given ${rest.length}: ${shown}${hint}`);
  }
  const [argument = ''] = rest;
  if (rest.length < takes) throw new UsageError(`missing ${parameter}`);
  return [command, argument, options];
}

/** What a run of the command reads and writes: the process's own, unless its caller gives others. */
export interface CommandIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  env: NodeJS.ProcessEnv;
}

/** Runs the command `args` name; resolves with its exit code (bin/petstore.js). */
export async function main(
  args: string[],
  { stdout, stderr, env }: CommandIo = { stdout: process.stdout, stderr: process.stderr, env: process.env },
): Promise<number> {
  if (args.length === 0 || args[0] === '--help' || args[0] === '-h') {
    stdout.write(`${USAGE}\n`);
    return args.length === 0 ? 2 : 0;
  }
  let storage: Storage | undefined;
  try {
    const [command, argument, options] = parse(args);
    await command.check?.(argument, options);
    storage = await openStorage(loadConfig(env).database);
    await command.run(storage, (line) => stdout.write(`${line}\n`), argument, options);
    return 0;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    stderr.write(`petstore: ${message}\n${error instanceof UsageError ? `\n${USAGE}\n` : ''}`);
    return error instanceof UsageError ? 2 : 1;
  } finally {
    await storage?.close();
  }
}
