/** A byte count as people read it: "512 B", "3.4 KB", "12.0 MB" (binary multiples, as file
 * managers show them). Used wherever the web app shows a size: the import dialog's chosen files,
 * an export's progress. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`
  return `${(n / 1024 / 1024).toFixed(1)} MB`
}
