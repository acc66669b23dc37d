// What the TypeScript client's types refuse and what an editor shows of it, checked by the compiler:
// a fixture of calls, each `@ts-expect-error` line one that must not compile (a misspelt error code,
// an ETag that may be absent sent as If-Match, a list that does not page given to `each`), compiled
// at the settings the docs recommend; and the doc comments its methods carry from the contract.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import ts from 'typescript';
import { projectRoot } from '../src/contract/paths.js';
import { temporaryDirectory } from './helpers/api.js';
import { contract } from './helpers/contract.js';

const client = join(projectRoot, 'clients', 'typescript', 'src', 'v1.js');

const FIXTURE = `
import { createClient, isKnownCode, isPetstoreError, type PetstoreClient } from '${client}';

const petstore: PetstoreClient = createClient({ baseUrl: 'http://127.0.0.1:1/v1', apiKey: 'psk_x' });

export async function codes(error: unknown): Promise<void> {
  if (isPetstoreError(error, 'getPet')) {
    const known = error.code === 'not_found' || error.code === 'unknown';
    // @ts-expect-error -- a misspelt code
    const misspelt = error.code === 'pet_not_fonud';
    // @ts-expect-error -- a code getPet never answers
    const foreign = error.code === 'pet_on_order';
    if (isKnownCode(error)) {
      // @ts-expect-error -- once known, it is not 'unknown'
      void (error.code === 'unknown');
    }
    void [known, misspelt, foreign];
  }
}

export async function etags(petId: number): Promise<void> {
  const page = await petstore.listPets({ query: { limit: 10 } });
  // @ts-expect-error -- a page has an ETag only when it holds exactly one animal
  const stale: string = page.etag;
  // @ts-expect-error -- so it is not a precondition to send as it is
  await petstore.updatePet({ path: { petId }, header: { 'If-Match': page.etag }, body: { name: 'x' } });
  if (page.etag !== undefined) {
    await petstore.updatePet({ path: { petId }, header: { 'If-Match': page.etag }, body: { name: 'x' } });
  }
  const created = await petstore.createPet({ body: { name: 'Rex', categoryId: 1 } });
  const always: string = created.etag;
  await petstore.modify(
    () => petstore.listPets({ query: { id: [petId] } }),
    (current) => petstore.updatePet({ path: { petId }, header: { 'If-Match': current.etag }, body: { name: 'y' } }),
  );
  void [stale, always];
}

export async function lists(): Promise<void> {
  for await (const pet of petstore.each('listPets')) void pet.name;
  // @ts-expect-error -- listWebhooks does not page: it is one call
  petstore.each('listWebhooks');
  // @ts-expect-error -- nor does page take it
  await petstore.page('listWebhooks');
  void (await petstore.listWebhooks()).data;
}

export const deprecated = petstore.getPet;
export const current = petstore.listPets;
`;

const OPTIONS: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2023,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  lib: ['lib.es2023.d.ts', 'lib.dom.d.ts', 'lib.dom.iterable.d.ts'],
  strict: true,
  exactOptionalPropertyTypes: true,
  noUncheckedIndexedAccess: true,
  noEmit: true,
  skipLibCheck: true,
  types: [],
};

t.test('what must not compile does not, and the rest does', async (t) => {
  const file = join(temporaryDirectory(t), 'fixture.ts');
  writeFileSync(file, FIXTURE);
  const program = ts.createProgram([file], OPTIONS);
  const diagnostics = ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const where = diagnostic.file?.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
    return `${diagnostic.file?.fileName ?? ''}:${(where?.line ?? 0) + 1}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')}`;
  });
  t.same(diagnostics, [], 'no error but those expected (an unused @ts-expect-error is one)');
  const expected = FIXTURE.split('\n').filter((line) => line.includes('@ts-expect-error')).length;
  t.ok(expected >= 7, `${expected} lines the types refuse`);

  // What an editor shows on hovering each method: its summary, its description, its deprecation.
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file);
  const documented = new Map<string, { text: string; tags: ts.JSDocTagInfo[] }>();
  source?.forEachChild(function visit(node): void {
    if (
      ts.isPropertyAccessExpression(node) &&
      ts.isIdentifier(node.expression) &&
      node.expression.text === 'petstore'
    ) {
      const symbol = checker.getSymbolAtLocation(node.name);
      if (symbol !== undefined) {
        const text = ts.displayPartsToString(symbol.getDocumentationComment(checker));
        documented.set(node.name.text, { text, tags: symbol.getJsDocTags(checker) });
      }
    }
    node.forEachChild(visit);
  });
  const operation = (id: string) => contract.operations.find(({ operationId }) => operationId === id);
  const getPet = documented.get('getPet');
  const summary = contract.dereferenced.paths?.['/pets/{petId}']?.get?.summary ?? '';
  t.ok(getPet?.text.startsWith(summary), `getPet shows its summary: ${summary}`);
  const deprecation = getPet?.tags.find(({ name }) => name === 'deprecated');
  const said = ts.displayPartsToString(deprecation?.text);
  t.ok(deprecation !== undefined, 'getPet is marked deprecated (struck through)');
  const { sunset, successor } = operation('getPet')?.deprecation ?? {};
  t.match(said, sunset?.toISOString().slice(0, 10) ?? 'no sunset', 'with its sunset date');
  t.match(said, successor ?? 'no successor', 'and its successor');
  t.match(documented.get('listPets')?.text ?? '', /List animals/, 'listPets shows its summary');
  t.notOk(
    documented.get('listPets')?.tags.some(({ name }) => name === 'deprecated'),
    'and is not marked deprecated',
  );
});
