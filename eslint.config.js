// ESLint for src/, scripts/ and test/ (npm run lint): typescript-eslint's strict and stylistic
// rules, with type information from tsconfig.json. Formatting is Prettier's (npm run format:check).
import eslint from '@eslint/js';
import { defineConfig, globalIgnores } from 'eslint/config';
import tseslint from 'typescript-eslint';

// src/'s folders as layers, top to bottom (docs/repository.md): a module imports its own folder or
// one further down, never one above, and nothing imports the entry points at the top of src/.
// app/ holds the parts app.ts composes, so it sits right below it.
const LAYERS = [
  'app',
  'config',
  'dev',
  'plugins',
  'tracing',
  'handlers',
  'http',
  'auth',
  'metrics',
  'events',
  'storage',
  'domain',
  'versions',
  'contract',
];
const importsPointDown = LAYERS.map((layer, i) => ({
  files: [`src/${layer}/**/*.ts`],
  rules: {
    'no-restricted-imports': [
      'error',
      {
        patterns: [
          {
            regex: `^(\\.\\./)+(${['app.js', 'server.js', 'cli.js', ...LAYERS.slice(0, i).map((above) => `${above}/`)].join('|')})`,
            message: `src/${layer}/ may import only its own folder and those below it (eslint.config.js: LAYERS).`,
          },
        ],
      },
    ],
  },
}));

export default defineConfig(
  globalIgnores([
    'dist/',
    'generated/',
    'clients/typescript/dist/',
    'clients/typescript/src/generated/',
    'coverage/',
    '.tap/',
    'bench-results/',
  ]),
  eslint.configs.recommended,
  tseslint.configs.strictTypeChecked,
  tseslint.configs.stylisticTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // Numbers print predictably (statuses, ports, ids); other non-strings must be converted on purpose.
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
      // tap tracks the subtests t.test() and t.skip() return and never rejects them: awaiting each
      // top-level test would only serialise the file.
      '@typescript-eslint/no-floating-promises': [
        'error',
        { allowForKnownSafePromises: [{ from: 'package', name: 'PromiseWithSubtest', package: '@tapjs/core' }] },
      ],
      // Off: `async` without `await` is how a synchronous implementation (better-sqlite3 storage,
      // fastify plugins and hooks) meets a Promise-returning interface and turns a throw into a
      // rejection. no-misused-promises and no-floating-promises still guard how promises are used.
      '@typescript-eslint/require-await': 'off',
      // `(x) => doSomething(x)` as a callback whose result is ignored is idiomatic; the rule still
      // flags void values returned or used anywhere else.
      '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreArrowShorthand: true }],
      // Off: it rewrites `x as T` into `x!`, which strict's no-non-null-assertion then forbids; its own
      // documentation says not to combine the two.
      '@typescript-eslint/non-nullable-type-assertion-style': 'off',
    },
  },
  ...importsPointDown,
  {
    // Node's and fastify's members named with a leading underscore are private: code that reads or
    // replaces them breaks silently on an upgrade (issue 55). What they gave is had through public
    // APIs (serverFactory, hooks, documented options) or left to the balancer (docs/decisions.md).
    files: ['src/**/*.ts', 'scripts/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: 'MemberExpression[property.name=/^_/]',
          message: 'A member whose name begins with _ is private to its library: use a public API (docs/decisions.md).',
        },
        {
          selector: 'MemberExpression[computed=true][property.value=/^_/]',
          message: 'A member whose name begins with _ is private to its library: use a public API (docs/decisions.md).',
        },
      ],
    },
  },
  {
    // Configuration files are plain JavaScript outside tsconfig.json: no type information.
    files: ['**/*.js'],
    extends: [tseslint.configs.disableTypeChecked],
    // bin/petstore.js runs under Node.
    languageOptions: { globals: { process: 'readonly' } },
  },
);
