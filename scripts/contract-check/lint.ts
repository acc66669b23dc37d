import { type Drift, files } from './drift.js';
import { parseReport, redocly } from './tools.js';

interface LintReport {
  totals: { errors: number; warnings: number };
  problems: {
    ruleId: string;
    severity: string;
    message: string;
    location: { source: { ref: string }; pointer?: string; start?: { line: number; col: number } }[];
  }[];
}

const FIX = {
  edit: `correct ${files.contract} (npx redocly lint ${files.contract} shows each in context), or exempt it with a reason in redocly.yaml`,
};

/** The contract passes Redocly's lint with the committed ruleset (redocly.yaml): no error, no warning. */
export async function checkLint(root: string): Promise<Drift[]> {
  const result = await redocly(root, [
    'lint',
    files.contract,
    '--format=json',
    '--lint-config=error',
    '--max-problems=1000',
  ]);
  const report = parseReport('redocly lint', result) as LintReport;
  const drifts = report.problems.map(({ ruleId, severity, message, location }): Drift => {
    const [first] = location;
    const line = first?.start === undefined ? '' : `:${first.start.line}:${first.start.col}`;
    return {
      what: `lint ${severity} ${ruleId}: ${message}`,
      where: `${first?.source.ref ?? files.contract}${line}${first?.pointer === undefined ? '' : ` ${first.pointer}`}`,
      fix: FIX,
    };
  });
  if (drifts.length === 0 && result.code !== 0) {
    drifts.push({ what: `redocly lint failed: ${result.stderr.trim()}`, where: 'redocly.yaml', fix: FIX });
  }
  return drifts;
}
