/** Saving what the API answered (a CSV of visits, an export of links) as a file on the user's machine. */

/** The file name a `Content-Disposition` header gives, or `fallback` when it gives none. */
export function fileNameFrom(contentDisposition: string | null, fallback: string): string {
  const header = contentDisposition ?? '';
  const encoded = /filename\*\s*=\s*UTF-8''([^;]+)/i.exec(header)?.[1];
  if (encoded) {
    try {
      return decodeURIComponent(encoded.trim());
    } catch {
      // a malformed escape: try the plain parameter
    }
  }
  const plain = /filename\s*=\s*"?([^";]+)"?/i.exec(header)?.[1]?.trim();
  return plain && !/[\\/]/.test(plain) ? plain : fallback;
}

/** Hands a blob to the browser as a download named `name`. */
export function saveFile(blob: Blob, name: string): void {
  const address = URL.createObjectURL(blob);
  const anchor = document.createElement('a');
  anchor.href = address;
  anchor.download = name;
  anchor.hidden = true;
  document.body.append(anchor);
  anchor.click();
  anchor.remove();
  // The download has taken the blob by now; a later revoke would only hold the memory longer.
  setTimeout(() => URL.revokeObjectURL(address), 0);
}
