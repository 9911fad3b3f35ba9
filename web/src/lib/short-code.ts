/** What the server accepts as a short code (spec §2.1): 6 to 10 letters and digits. */
export const CODE_PATTERN = '[a-zA-Z0-9]{6,10}';
