import { readdirSync, readFileSync } from 'node:fs';

/**
 * The nice value of each thread of process `pid` (Linux: field 19 of `/proc/<pid>/task/<tid>/stat`,
 * counted after the command name's closing parenthesis, which may itself hold spaces), by thread id.
 */
export function threadNices(pid: number | 'self' = 'self'): Map<number, number> {
  const nices = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended meanwhile
    }
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    nices.set(Number(tid), Number(fields[16])); // field 19 of the whole line: state is field 3
  }
  return nices;
}

/** How many threads of process `pid` run at nice value `nice`. */
export function threadsAtNice(nice: number, pid: number | 'self' = 'self'): number {
  return [...threadNices(pid).values()].filter((n) => n === nice).length;
}
