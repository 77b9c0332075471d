/*
 * media: the images of an OpenAI chat request.  A message's content part
 * {"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}
 * (the image_url given as the URL string alone too; any "detail" is
 * ignored) is an image: its bytes are decoded from the data: URI and
 * checked against the server's limits, and the chat template sees
 * {"type": "image"} in its place, as transformers' processors take images.
 * Nothing is fetched: an http(s) URL is refused.  The images go into the
 * prompt, in the order the parts come, where the template puts its image
 * markers (media_prompt).
 */
#ifndef MEMRA_MEDIA_H
#define MEMRA_MEDIA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct json;

/* What a request may send. */
struct media_limits {
	int	max_images;	/* images in a request; 0: images are not enabled */
	size_t	image_bytes;	/* an image's bytes (as decoded from base64) */
	size_t	request_bytes;	/* all of a request's images' bytes */
};

struct media_image {
	unsigned char *data;	/* [n] the file's bytes (PNG or JPEG, unchecked) */
	size_t	n;
	char	where[64];	/* its part: "messages[I].content[J]" */
};

struct media {
	int	n;
	struct media_image *img;	/* [n] in the order of the parts */
	size_t	bytes;		/* their bytes in all */
};

/*
 * The images of a chat request's messages (the request's "messages";
 * NULL or not an array: none) into md, within lim.  0, or -1 with the
 * reason in err (UTIL_ERRLEN) naming the part, e.g.
 *   'messages[0].content[1]': images are not enabled on this server
 *   'messages[0].content[1].image_url.url': an http(s) URL: this server
 *       fetches nothing: send the image as a data: URI (base64)
 *   'messages[0].content[1].image_url.url': bad base64 at byte 17
 *   'messages[0].content[1]': an image of 2000000 bytes: more than the
 *       1048576 an image may have
 * A part of type "image" (no image with it) is refused too.  media_free
 * frees md (after a failure too; a zeroed md is a no-op).
 */
int	media_parse(const struct json *messages, const struct media_limits *lim,
	    struct media *md, char *err);
void	media_free(struct media *md);

/*
 * messages as JSON on fp (json_dump's compact form; NULL: null), each
 * image part written {"type": "image"}: what the chat template is given.
 */
void	media_put_messages(FILE *fp, const struct json *messages);

struct image_limits;
struct vision;
struct vision_prompt;
struct vision_tokens;

/*
 * The prompt ids[n] (the chat template's, with an image marker vt->img
 * for each image of md) with md's images: each decoded within lim and fit
 * to max_tokens soft tokens (vision_prepare), then every marker expanded
 * and the images encoded by v (vision_prompt_build) into vp.  *out:
 * malloc'd [*n_out].  0, or -1 with the reason in err, naming the image's
 * part for a bad image ("'messages[0].content[1]': not a PNG or JPEG
 * image").  Runs the tower: the caller serializes the calls on one v.
 */
int	media_prompt(const struct media *md, struct vision *v, const struct vision_tokens *vt,
	    const struct image_limits *lim, int max_tokens, const int32_t *ids, size_t n,
	    int32_t **out, size_t *n_out, struct vision_prompt *vp, char *err);

#endif
