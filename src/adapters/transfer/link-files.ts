import { JSONParser } from '@streamparser/json';
import { parse as parseCsv } from 'csv-parse';
import { pipeline, Readable } from 'node:stream';
import { AppError, errors } from '../../domain/errors.js';
import { CSV_HEADER, csvLine, type LinkRecord, type RawRow, TRANSFER_COLUMNS } from '../../domain/link-transfer.js';

/** The two formats of an export and an import file. */
export const LINK_FILE_FORMATS = ['csv', 'json'] as const;
export type LinkFileFormat = (typeof LINK_FILE_FORMATS)[number];

/** The format a file name says (`.csv`, `.json`), if it says one. */
export function formatOfFileName(name: string): LinkFileFormat | undefined {
  const extension = /\.([a-z]+)$/i.exec(name)?.[1]?.toLowerCase();
  return LINK_FILE_FORMATS.find((format) => format === extension);
}

/** Text of an export is handed on in pieces of about this many characters. */
const CHUNK_CHARS = 64 * 1024;

/**
 * The export file, a piece at a time, as the links are read: CSV with its header row, or a JSON
 * array of objects with the same keys. What is held is one piece, whatever the number of links.
 */
export async function* exportText(records: AsyncIterable<LinkRecord>, format: LinkFileFormat): AsyncGenerator<string> {
  let piece = format === 'csv' ? CSV_HEADER : '[';
  let first = true;
  for await (const record of records) {
    if (format === 'csv') piece += csvLine(record);
    else {
      piece += `${first ? '\n' : ',\n'}${JSON.stringify(record, TRANSFER_COLUMNS as unknown as string[])}`;
      first = false;
    }
    if (piece.length >= CHUNK_CHARS) {
      yield piece;
      piece = '';
    }
  }
  yield format === 'csv' ? piece : `${piece}\n]\n`;
}

/**
 * The data rows of an import file as they are read from `input` (its bytes). CSV: a header row
 * naming the columns (`code` and `url` required, no column unknown), then one link a row; JSON:
 * an array of objects. A file that cannot be read as its format throws IMPORT_FORMAT (422) at the
 * point where it breaks; a row that can be read but is wrong is the import's to refuse.
 */
export function readLinkRows(input: AsyncIterable<Buffer | string>, format: LinkFileFormat): AsyncIterable<RawRow> {
  return format === 'csv' ? readCsv(input) : readJson(input);
}

async function* readCsv(input: AsyncIterable<Buffer | string>): AsyncGenerator<RawRow> {
  const parser = parseCsv({
    bom: true,
    columns: (header: string[]) => checkedHeader(header),
    skip_empty_lines: true,
    relax_column_count: true,
    trim: true,
  });
  // A failure of the input (a body over the limit) ends the parser with that error.
  pipeline(Readable.from(input), parser, () => undefined);
  try {
    for await (const record of parser) yield record as RawRow;
  } catch (error) {
    if (error instanceof AppError) throw error;
    throw errors.importFormat(`CSV: ${(error as Error).message}`);
  }
}

function checkedHeader(header: string[]): string[] {
  const columns = header.map((name) => name.trim().toLowerCase());
  const unknown = columns.find((name) => !(TRANSFER_COLUMNS as readonly string[]).includes(name));
  if (unknown !== undefined) {
    throw errors.importFormat(
      `CSV: unknown column '${unknown}' in the header row (known: ${TRANSFER_COLUMNS.join(', ')})`,
    );
  }
  for (const required of ['code', 'url']) {
    if (!columns.includes(required)) throw errors.importFormat(`CSV: the header row has no '${required}' column`);
  }
  return columns;
}

/** The bytes without the byte order mark a file may start with. */
function withoutBom(chunk: Buffer | string): Buffer | string {
  if (typeof chunk === 'string') return chunk.replace(/^\uFEFF/, '');
  return chunk[0] === 0xef && chunk[1] === 0xbb && chunk[2] === 0xbf ? chunk.subarray(3) : chunk;
}

async function* readJson(input: AsyncIterable<Buffer | string>): AsyncGenerator<RawRow> {
  const parser = new JSONParser({ paths: ['$.*'], keepStack: false });
  let rows: RawRow[] = [];
  parser.onValue = ({ value }) => void rows.push(value);
  let started = false;
  const write = (chunk: Buffer | string) => {
    try {
      if (!started) {
        chunk = withoutBom(chunk);
        const text = chunk.toString().trimStart();
        if (text === '') return;
        if (!text.startsWith('[')) throw errors.importFormat('JSON: the body must be an array of objects');
        started = true;
      }
      parser.write(chunk);
    } catch (error) {
      if (error instanceof AppError) throw error;
      throw errors.importFormat(`JSON: ${(error as Error).message}`);
    }
  };
  for await (const chunk of input) {
    write(chunk);
    if (rows.length > 0) {
      const ready = rows;
      rows = [];
      yield* ready;
    }
  }
  if (!started) throw errors.importFormat('JSON: the body is empty; an array of objects is required');
  if (!parser.isEnded) throw errors.importFormat('JSON: the array is not closed (the body ends too soon)');
  yield* rows;
}
