/**
 * Each operation's `x-error-codes` names, for every error status it declares, the `ErrorCode`s its
 * Error body may carry; a generated client types `code` from it. The responses check holds the
 * server to these lists (responses.ts); this one holds the lists to the contract.
 */
import type { Contract, ContractOperation } from '../../src/contract/document.js';
import { type Drift, files } from './drift.js';
import { operationObject } from './tools.js';

/** The values of the contract's `ErrorCode` schema: every code this version sends. */
export function errorCodeValues(contract: Contract): Set<string> {
  const schema = contract.dereferenced.components?.schemas?.ErrorCode as { enum?: unknown } | undefined;
  return new Set(Array.isArray(schema?.enum) ? schema.enum.map(String) : []);
}

const isErrorStatus = (status: string) => /^[45]([0-9]{2}|XX)$/i.test(status);

/** The statuses an operation declares that answer with an Error body: `4xx`, `5xx` and their ranges. */
export function errorStatuses(contract: Contract, operation: ContractOperation): string[] {
  return Object.keys(operationObject(contract, operation)?.responses ?? {}).filter(isErrorStatus);
}

const FORMAT = "x-error-codes: {'<status>': [<ErrorCode>, ...]} for each error status the operation declares";

/** Every operation lists codes for exactly the error statuses it declares, each list of `ErrorCode`s. */
export function checkErrorCodes(contract: Contract): Drift[] {
  const known = errorCodeValues(contract);
  return contract.operations.flatMap((operation): Drift[] => {
    const { operationId, method, path, errorCodes } = operation;
    const where = `${files.contract}: ${method} ${path} x-error-codes`;
    const statuses = errorStatuses(contract, operation);
    if (errorCodes === undefined) {
      return [
        { what: `operation ${operationId} does not name its error codes`, where, fix: { edit: `give it ${FORMAT}` } },
      ];
    }
    const missing = statuses
      .filter((status) => (errorCodes[status] ?? []).length === 0)
      .map((status) => ({
        what: `operation ${operationId} declares response ${status} but names no code for it`,
        where,
        fix: { edit: `list the codes its ${status} may carry under x-error-codes '${status}'` },
      }));
    const undeclared = Object.keys(errorCodes)
      .filter((status) => !statuses.includes(status))
      .map((status) => ({
        what: `operation ${operationId} names codes for ${status}, an error response it does not declare`,
        where,
        fix: { edit: `remove '${status}' from its x-error-codes, or declare the response` },
      }));
    const unknown = Object.entries(errorCodes).flatMap(([status, codes]) =>
      codes
        .filter((code) => !known.has(code))
        .map((code) => ({
          what: `operation ${operationId} names ${code} for ${status}, which is not a value of ErrorCode`,
          where,
          fix: { edit: 'correct the code, or add it to components.schemas.ErrorCode (docs/errors.md)' },
        })),
    );
    return [...missing, ...undeclared, ...unknown];
  });
}
