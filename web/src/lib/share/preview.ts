//! What a share's visitor may see in the browser when the share allows previews: images as
//! their 1024 px thumbnail (not counted as a download), video and audio through a media URL
//! (made once per playback; it counts as one download of the share).
import { grants, visit, visitor } from "./visitor";

export type PreviewKind = "image" | "video" | "audio";

const KINDS: [RegExp, PreviewKind][] = [
  [/\.(png|jpe?g|jpe|jfif|gif|webp)$/i, "image"],
  [/\.(mp4|m4v|webm|ogv|mov)$/i, "video"],
  [/\.(mp3|m4a|aac|oga|ogg|opus|wav|flac)$/i, "audio"],
];

/** How a file of this name is previewed, or null when it is only downloaded. */
export function previewKind(name: string): PreviewKind | null {
  return KINDS.find(([pattern]) => pattern.test(name))?.[1] ?? null;
}

/** A media URL of file `id` of share `code`, for a player. */
export async function shareMediaUrl(code: string, id: string): Promise<string> {
  const answer = await visit(() =>
    visitor.POST("/api/v1/share/{code}/media/{object_id}", {
      params: { path: { code, object_id: id } },
      headers: grants.headers(code),
    }),
  );
  return answer.url;
}
