import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import t from 'tap';
import { projectRoot } from '../src/contract/paths.js';

// What a reader copies from the docs must exist: the files they link to or name, the `npm run`
// scripts, the test files a command names and the environment variables they set.

const inRoot = (path: string) => join(projectRoot, path);

const docs = [
  'README.md',
  'CONTRIBUTING.md',
  'BENCHMARKS.md',
  'clients/typescript/README.md',
  ...readdirSync(inRoot('docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
].filter((doc) => existsSync(inRoot(doc)));

/** Every file the code, scripts and configuration read variables in: where a variable must be named. */
function sourceText(): string {
  const files: string[] = ['package.json', '.ci/run', '.ci/install-packages', 'deploy/run-local.sh'];
  const walk = (folder: string) => {
    for (const entry of readdirSync(inRoot(folder), { withFileTypes: true })) {
      const path = `${folder}/${entry.name}`;
      if (entry.isDirectory()) walk(path);
      else if (/\.(ts|js|sh|cfg)$/.test(entry.name)) files.push(path);
    }
  };
  for (const folder of ['src', 'scripts', 'test', 'deploy', 'clients/typescript/src']) walk(folder);
  return files
    .filter((file) => existsSync(inRoot(file)))
    .map((file) => readFileSync(inRoot(file), 'utf8'))
    .join('\n');
}

const sourceCode = sourceText();
const scripts = Object.keys((JSON.parse(readFileSync(inRoot('package.json'), 'utf8')) as { scripts: object }).scripts);

/** The text of every code span and code block: what a reader runs or types. */
function codeOf(markdown: string): string[] {
  const blocks = [...markdown.matchAll(/^```[^\n]*\n([\s\S]*?)^```/gm)].map((match) => match[1] ?? '');
  const withoutBlocks = markdown.replace(/^```[^\n]*\n[\s\S]*?^```/gm, '');
  const spans = [...withoutBlocks.matchAll(/`([^`\n]+)`/g)].map((match) => match[1] ?? '');
  return [...blocks, ...spans];
}

/** A path as a reader would resolve it: from the repository's root or from the document's folder. */
const exists = (doc: string, path: string) =>
  [path, join(dirname(doc), path)].some((candidate) => existsSync(inRoot(normalize(candidate))));

const placeholder = (path: string) => /[*<>…{}]|X\.Y|\bx\.test/.test(path);

/** The repository's own folders: a span that starts with one is a path (not a media type or a pair of words). */
const folders = ['src', 'test', 'scripts', 'docs', 'deploy', 'contracts', 'clients', 'generated', 'bin', '.ci'];
const repositoryPath = (span: string) =>
  /^\.?[\w-]+(\/[\w.-]+)+\/?$/.test(span) && folders.includes(span.replace(/^\.\//, '').split('/')[0] ?? '');

for (const doc of docs) {
  t.test(doc, async (t) => {
    const markdown = readFileSync(inRoot(doc), 'utf8');
    const spans = codeOf(markdown);

    for (const [, target] of markdown.matchAll(/\]\(([^)\s#]+)(?:#[^)]*)?\)/g)) {
      if (target === undefined || /^[a-z]+:/.test(target)) continue;
      t.ok(existsSync(inRoot(normalize(join(dirname(doc), target)))), `the link to ${target} leads to a file`);
    }

    const namedPaths = spans.filter((span) => repositoryPath(span) && !placeholder(span));
    for (const path of namedPaths) t.ok(exists(doc, path), `${path} exists`);

    const testFiles = spans.flatMap((span) => [...span.matchAll(/\btest\/[\w-]+\.test\.ts\b/g)].map((m) => m[0]));
    for (const file of testFiles) t.ok(exists(doc, file), `the test file ${file} exists`);

    const npmScripts = spans.flatMap((span) =>
      [...span.matchAll(/\bnpm run (?:-s )?([\w-]+(?::[\w-]+)*)/g)].map((m) => m[1]),
    );
    for (const script of npmScripts) t.ok(scripts.includes(script ?? ''), `npm run ${script} is a script`);

    const variables = new Set(spans.filter((span) => /^[A-Z][A-Z0-9]*_[A-Z0-9_]+$/.test(span)));
    for (const variable of variables) {
      // OTEL_* are read by the OpenTelemetry SDK itself, as its specification names them.
      if (variable.startsWith('OTEL_')) continue;
      t.ok(new RegExp(`\\b${variable}\\b`).test(sourceCode), `${variable} is read by the code`);
    }
  });
}
