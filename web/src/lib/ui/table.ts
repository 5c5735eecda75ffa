//! The column headers a `DataTable` shows: a label, right-aligned numbers, or a label only
//! screen readers hear (an actions column).

export type Column = {
  label: string;
  /** A number column: the header (and, by the row's own `class="num"`, its cells) align right. */
  num?: boolean;
  /** The label is read out but not shown. */
  hidden?: boolean;
};
