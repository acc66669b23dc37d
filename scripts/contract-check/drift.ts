/** One way code and contract have parted, and how to bring them back together. */
export interface Drift {
  /** What drifted, in a phrase. */
  what: string;
  /** Where: a file and line, an operation, a JSON pointer. */
  where: string;
  /** Lines that show the drift (a diff), printed under the message. */
  detail?: string[];
  /** The one command that fixes it or, when no command can, what to do. */
  fix: { run: string } | { edit: string };
}

export function formatDrift({ what, where, detail = [], fix }: Drift): string {
  const action = 'run' in fix ? `run: ${fix.run}` : `fix: ${fix.edit}`;
  return [`contract:check: ${what} (${where})`, ...detail.map((line) => `    ${line}`), `  ${action}`].join('\n');
}

/** The files the checks read, relative to the project root (and named so in messages). */
export const files = {
  contract: 'openapi.yaml',
  generated: 'generated',
  releases: 'contracts',
  unreachedResponses: 'contracts/unreached-responses.json',
  acceptedChanges: 'contracts/accepted-changes.json',
  changelog: 'contracts/CHANGELOG.md',
} as const;
