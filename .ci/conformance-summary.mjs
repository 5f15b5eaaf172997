// Prints the table of an MCP conformance run and exits 1 when a required
// scenario did not pass. Reads runs.tsv (target, scenario, exit code,
// required 0/1, output dir; one run a line) written by .ci/conformance, and
// each run's checks.json written by the conformance CLI.
//
// Usage: node conformance-summary.mjs RESULTS_DIR
import fs from 'node:fs';
import path from 'node:path';

const dir = process.argv[2];
const runs = fs
  .readFileSync(path.join(dir, 'runs.tsv'), 'utf8')
  .split('\n')
  .filter(Boolean)
  .map((line) => {
    const [target, scenario, rc, required, out] = line.split('\t');
    return { target, scenario, rc: Number(rc), required: required === '1', out };
  });

function findChecks(out) {
  const found = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name === 'checks.json') found.push(p);
    }
  };
  walk(out);
  return found.sort().at(-1);
}

function oneLine(s, max = 150) {
  s = String(s ?? '').replace(/\s+/g, ' ').trim();
  return s.length > max ? s.slice(0, max - 3) + '...' : s;
}

function judge(run) {
  if (run.rc === 124) return { result: 'FAIL', checks: '-', why: 'timed out' };
  const file = findChecks(run.out);
  if (!file) {
    let tail = '';
    try {
      tail = fs.readFileSync(path.join(run.out, 'output.txt'), 'utf8').trim().split('\n').at(-1);
    } catch {}
    return { result: 'FAIL', checks: '-', why: oneLine(`no results (exit ${run.rc}) ${tail}`) };
  }
  const checks = JSON.parse(fs.readFileSync(file, 'utf8'));
  const judged = checks.filter((c) => ['SUCCESS', 'FAILURE', 'WARNING'].includes(c.status));
  const failed = judged.filter((c) => c.status === 'FAILURE');
  const warned = judged.filter((c) => c.status === 'WARNING');
  const passed = judged.filter((c) => c.status === 'SUCCESS');
  const count = `${passed.length}/${passed.length + failed.length}` + (warned.length ? ` ${warned.length}w` : '');
  if (failed.length || run.rc !== 0) {
    const f = failed[0];
    const why = f ? `${f.id}: ${f.errorMessage ?? f.description}` : `exit ${run.rc}`;
    return { result: 'FAIL', checks: count, why: oneLine(why) };
  }
  if (!passed.length) {
    const w = warned[0];
    return { result: 'NONE', checks: count, why: oneLine(w ? `nothing verified; warning ${w.id}: ${w.errorMessage ?? w.description}` : 'nothing verified') };
  }
  // A scenario whose fixture (tool, prompt, resource) the server lacks can
  // still pass on a generic error result: say so.
  const missing = /\bnot found\b|tool_unavailable/i;
  const vacuous = passed.find((c) => missing.test(JSON.stringify(c.details ?? {})));
  if (vacuous) {
    const m = JSON.stringify(vacuous.details).match(/[^"]*(\bnot found\b|tool_unavailable)[^"]*/i);
    return { result: 'PASS*', checks: count, why: oneLine(`passed without its fixture: ${m ? m[0] : 'not found'}`) };
  }
  const w = warned[0];
  return { result: 'PASS', checks: count, why: w ? oneLine(`warning ${w.id}: ${w.errorMessage ?? w.description}`) : '' };
}

const rows = runs.map((r) => ({ ...r, ...judge(r) }));
const head = { target: 'TARGET', scenario: 'SCENARIO', result: 'RESULT', checks: 'CHECKS', why: 'REASON / NOTE' };
const width = (k) => Math.max(head[k].length, ...rows.map((r) => String(r[k]).length));
const wt = width('target');
const ws = width('scenario') + 2; // room for the required mark
const wr = width('result');
const wc = width('checks');
const line = (r, mark = '  ') =>
  `${String(r.target).padEnd(wt)}  ${(r.scenario + mark).padEnd(ws)}  ${String(r.result).padEnd(wr)}  ${String(r.checks).padEnd(wc)}  ${r.why}`.trimEnd();

console.log('');
console.log(line(head));
let last = '';
for (const r of rows) {
  if (last && r.target !== last) console.log('');
  last = r.target;
  console.log(line(r, r.required ? ' !' : '  '));
}
console.log('');
console.log('!: required (the run fails unless it passes)   w: warnings');
console.log("PASS*: passed only because the server lacks the scenario's fixture   NONE: nothing was verified (only warnings)");

const byTarget = new Map();
for (const r of rows) {
  const t = byTarget.get(r.target) ?? { pass: 0, vacuous: 0, total: 0 };
  t.total++;
  if (r.result.startsWith('PASS')) t.pass++;
  if (r.result === 'PASS*') t.vacuous++;
  byTarget.set(r.target, t);
}
for (const [target, t] of byTarget) {
  const note = t.vacuous ? ` (${t.vacuous} of them only without their fixture)` : '';
  console.log(`${target}: ${t.pass} of ${t.total} scenarios pass${note}`);
}

// toolplane fronting a server must pass every scenario the server passes
// when tested directly.
const result = (target, scenario) => rows.find((r) => r.target === target && r.scenario === scenario)?.result ?? '';
const gaps = rows
  .filter((r) => r.target === 'server-everything' && r.result.startsWith('PASS'))
  .filter((r) => !result('toolplane-everything', r.scenario).startsWith('PASS'))
  .map((r) => r.scenario);
if (rows.some((r) => r.target === 'toolplane-everything')) {
  console.log(gaps.length
    ? `fronted: toolplane-everything fails ${gaps.length} scenario(s) server-everything passes: ${gaps.join(', ')}`
    : 'fronted: toolplane-everything passes every scenario server-everything passes');
}

const required = rows.filter((r) => r.required);
const reqFailed = required.filter((r) => !r.result.startsWith('PASS'));
if (required.length) {
  console.log(`conformance: ${required.length - reqFailed.length} passed, ${reqFailed.length} failed`);
}
process.exit(reqFailed.length || gaps.length ? 1 : 0);
