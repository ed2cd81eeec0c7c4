// Types of `clockflake/decode`: decoding only, in plain JavaScript, for pages that read ids.
import type { LayoutInfo, Parts, PresetName } from './index.js';

export type { LayoutInfo, Parts, PresetName } from './index.js';
export { ClockflakeError } from './index.js';

/**
 * Splits an id (a bigint, or a decimal string) into its parts, as `decode` of `clockflake` does
 * (same codes and messages). `layout`: a preset name (default `'clockseq'`), or a
 * `describeLayout()` result of the full package for a custom layout.
 */
export declare function decode(id: bigint | string, layout?: PresetName | LayoutInfo | { layout?: PresetName | LayoutInfo }): Parts;
/** Every preset layout's description. */
export declare const layouts: Readonly<Record<PresetName, LayoutInfo>>;
