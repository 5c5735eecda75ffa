//! Unit helpers of the administration forms: sizes are typed in GiB or MiB and sent in bytes.
export const GiB = 1024 ** 3;
export const MiB = 1024 ** 2;

/** Bytes from a decimal number of units; NaN when the text is not a non-negative number. */
export function toBytes(text: string | number, unit: number): number {
  const v = typeof text === "number" ? text : Number.parseFloat(text);
  return Number.isFinite(v) && v >= 0 ? Math.round(v * unit) : Number.NaN;
}

/** A byte count in units, trimmed to three decimals for the form. */
export function inUnits(bytes: number, unit: number): string {
  return String(Math.round((bytes / unit) * 1000) / 1000);
}

/** The powers of two a policy's chunk size may take, 1 MiB to 256 MiB. */
export const CHUNK_SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 256].map((n) => n * MiB);
