import type { FastifyError } from 'fastify';

const PARTS: Record<string, string> = { querystring: 'query', params: 'params', body: 'body', headers: 'headers' };

/**
 * Each `pattern` of the contract in words: a client reads what is wrong, not a regular
 * expression. test/validation.test.ts fails for a pattern of the contract missing here.
 */
export const PATTERN_WORDS: Record<string, string> = {
  '^(?![\\s\\p{Default_Ignorable_Code_Point}]*$)[^\\p{Cc}\\p{Cs}]+$':
    'must contain a visible character and no control characters',
  '^[A-Za-z0-9_-]+$': 'must be only letters, digits, "-" and "_"',
  '^[\\x21-\\x7E]+$': 'must be only visible ASCII characters (no spaces)',
  '^[0-9]+$': 'must be only digits',
  '^"[0-9]+"$': 'must be digits in double quotes',
  '^whsec_[A-Za-z0-9+/]+={0,2}$': 'must be whsec_ and base64',
  '^[a-z][a-z0-9_]*$': 'must be lower-case letters, digits and "_", starting with a letter',
};

/** The words for the keywords whose Ajv message is not plain enough. */
function ruleInWords(keyword: string, params: Record<string, unknown>): string | undefined {
  const characters = (limit: unknown) => `${String(limit)} character${limit === 1 ? '' : 's'}`;
  const items = (limit: unknown) => `${String(limit)} item${limit === 1 ? '' : 's'}`;
  if (keyword === 'pattern') return PATTERN_WORDS[String(params.pattern)] ?? 'is not in the form the contract gives';
  if (keyword === 'minLength') return `must be at least ${characters(params.limit)} long`;
  if (keyword === 'maxLength') return `must be at most ${characters(params.limit)} long`;
  if (keyword === 'minItems') return `must hold at least ${items(params.limit)}`;
  if (keyword === 'maxItems') return `must hold at most ${items(params.limit)}`;
  return undefined;
}

/** `body/categoryId must be integer`: the first problem, naming the field or parameter. */
export function describeValidation(error: FastifyError): string {
  const [first] = error.validation ?? [];
  const part = PARTS[error.validationContext ?? ''] ?? error.validationContext ?? 'request';
  if (first === undefined) return `${part} is invalid`;
  const where = `${part}${first.instancePath}`;
  const { params } = first;
  if (first.keyword === 'additionalProperties') {
    return `${where}/${String(params.additionalProperty)} is not an allowed field`;
  }
  if (first.keyword === 'required') return `${where}/${String(params.missingProperty)} is required`;
  if (first.keyword === 'type' && where === 'body') return 'body must be a JSON object';
  if (first.keyword === 'enum') {
    return `${where} must be one of ${(params.allowedValues as unknown[]).join(', ')}`;
  }
  return `${where} ${ruleInWords(first.keyword, params) ?? first.message ?? 'is invalid'}`;
}
