//! Outgoing mail: the SMTP transport built from the `MAIL` settings at each send (a changed
//! setting applies to the next mail), the messages rendered from their templates
//! (`master/templates/mail/{language}/{name}.{txt,html}`) in the recipient's language, and the
//! administrators' test mail. Who gets which mail is decided by the use cases that send it
//! (`service::identity::mail_links`), not here.

use std::time::Duration;

use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use nubo_model::db::{self};
use nubo_model::domain::ids::UserId;
use nubo_model::domain::site_settings::{MailSettings, TlsMode};

use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::settings::site;

/// How long one SMTP exchange may take before the send fails.
const SMTP_TIMEOUT: Duration = Duration::from_secs(15);

fn not_configured(what: &str) -> ServiceError {
    ServiceError::new(
        ErrorKind::Unavailable,
        codes::MAIL_NOT_CONFIGURED,
        format!("mail cannot be sent: {what}; an administrator sets it under the mail settings"),
    )
}

fn send_failed(err: lettre::transport::smtp::Error) -> ServiceError {
    ServiceError::new(
        ErrorKind::BadGateway,
        codes::MAIL_SEND_FAILED,
        format!("the SMTP server did not accept the mail: {err}; check the mail settings"),
    )
}

/// An SMTP transport and sender, built from the settings for one send.
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

impl Mailer {
    /// The mailer the current settings describe; refused while no SMTP host or sender is set.
    pub async fn from_settings(ctx: &Context) -> ServiceResult<Self> {
        Self::new(&site::current(ctx).await?.mail)
    }

    pub fn new(settings: &MailSettings) -> ServiceResult<Self> {
        if settings.host.is_empty() {
            return Err(not_configured("mail_smtp_host is not set"));
        }
        let from: Mailbox = settings
            .from
            .parse()
            .map_err(|_| not_configured("mail_from is not an address such as Nubo <nubo@example.com>"))?;
        type Smtp = AsyncSmtpTransport<Tokio1Executor>;
        let builder = match settings.tls {
            TlsMode::None => Smtp::builder_dangerous(&settings.host),
            TlsMode::Starttls => Smtp::starttls_relay(&settings.host).map_err(send_failed)?,
            TlsMode::Tls => Smtp::relay(&settings.host).map_err(send_failed)?,
        };
        let mut builder = builder.port(settings.port).timeout(Some(SMTP_TIMEOUT));
        if !settings.user.is_empty() {
            builder = builder.credentials(Credentials::new(settings.user.clone(), settings.password.clone()));
        }
        Ok(Self { transport: builder.build(), from })
    }

    /// Sends `mail` to `to`; the SMTP server's refusal (or silence) is the error's message.
    pub async fn send(&self, to: Mailbox, mail: Rendered) -> ServiceResult<()> {
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(mail.subject)
            .message_id(None)
            .multipart(MultiPart::alternative_plain_html(mail.text, mail.html))
            .map_err(ServiceError::internal)?;
        self.transport.send(message).await.map_err(send_failed)?;
        Ok(())
    }
}

/// The languages mail templates exist in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    En,
    ZhCn,
}

impl Language {
    /// The template language for a user's language tag: Chinese for `zh*`, else English.
    pub fn for_tag(tag: &str) -> Self {
        if tag.to_ascii_lowercase().starts_with("zh") { Language::ZhCn } else { Language::En }
    }

    fn tag(self) -> &'static str {
        match self {
            Language::En => "en",
            Language::ZhCn => "zh-CN",
        }
    }
}

/// The mails the service sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Template {
    MagicLink,
    PasswordReset,
    VerifyEmail,
    Test,
}

macro_rules! template_files {
    ($language:literal, $name:literal) => {
        (
            include_str!(concat!("../../../templates/mail/", $language, "/", $name, ".txt")),
            include_str!(concat!("../../../templates/mail/", $language, "/", $name, ".html")),
        )
    };
}

impl Template {
    /// The text template (its first line is the subject) and the HTML body.
    fn files(self, language: Language) -> (&'static str, &'static str) {
        match (language, self) {
            (Language::En, Template::MagicLink) => template_files!("en", "magic_link"),
            (Language::En, Template::PasswordReset) => template_files!("en", "password_reset"),
            (Language::En, Template::VerifyEmail) => template_files!("en", "verify_email"),
            (Language::En, Template::Test) => template_files!("en", "test"),
            (Language::ZhCn, Template::MagicLink) => template_files!("zh-CN", "magic_link"),
            (Language::ZhCn, Template::PasswordReset) => template_files!("zh-CN", "password_reset"),
            (Language::ZhCn, Template::VerifyEmail) => template_files!("zh-CN", "verify_email"),
            (Language::ZhCn, Template::Test) => template_files!("zh-CN", "test"),
        }
    }
}

/// A mail ready to send.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub subject: String,
    pub text: String,
    pub html: String,
}

fn escape_html(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

/// Replaces each `{{name}}` of `template` with its value, passed through `escape`, in one pass
/// (a value that itself reads `{{link}}` stays as it is). Unknown names are left alone.
fn fill(template: &str, values: &[(&str, &str)], escape: impl Fn(&str) -> String) -> String {
    let mut filled = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        filled.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            rest = &rest[start..];
            break;
        };
        match values.iter().find(|(name, _)| *name == &after[..end]) {
            Some((_, value)) => filled.push_str(&escape(value)),
            None => filled.push_str(&rest[start..start + end + 4]),
        }
        rest = &after[end + 2..];
    }
    filled.push_str(rest);
    filled
}

/// Renders `template` in `language` with `values` (the site name, the link, its lifetime...):
/// plain text as is, the HTML part with every value escaped, so a site name or address cannot
/// inject markup.
pub fn render(template: Template, language: Language, values: &[(&str, &str)]) -> Rendered {
    let (text, html) = template.files(language);
    let text = fill(text, values, str::to_owned);
    let (subject, body) = text.split_once('\n').unwrap_or((text.as_str(), ""));
    let html = fill(html, values, escape_html);
    Rendered {
        subject: subject.trim().to_owned(),
        text: body.trim_start_matches('\n').to_owned(),
        html: format!(
            "<!DOCTYPE html>\n<html lang=\"{}\"><head><meta charset=\"utf-8\"></head><body>\n{html}</body></html>\n",
            language.tag()
        ),
    }
}

/// The recipient `to` as a mailbox; a malformed address is the caller's mistake.
pub fn recipient(to: &str) -> ServiceResult<Mailbox> {
    to.trim().parse().map_err(|_| ServiceError::validation("to", "must be an e-mail address"))
}

/// Sends the test mail to `to` now, in the administrator's language, so the answer tells
/// whether the settings work.
pub async fn send_test(ctx: &Context, admin: UserId, to: &str) -> ServiceResult<()> {
    let to = recipient(to)?;
    let language = db::users::find(ctx.db(), admin).await?.map(|u| Language::for_tag(&u.language));
    let site_name = site::current(ctx).await?.site_name.clone();
    let mail = render(Template::Test, language.unwrap_or(Language::En), &[("site_name", &site_name)]);
    Mailer::from_settings(ctx).await?.send(to, mail).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_fills_its_placeholders() {
        let values =
            [("site_name", "Nubo"), ("link", "https://x/y"), ("minutes", "15"), ("hours", "24"), ("email", "a@b.c")];
        for language in [Language::En, Language::ZhCn] {
            for template in [Template::MagicLink, Template::PasswordReset, Template::VerifyEmail, Template::Test] {
                let mail = render(template, language, &values);
                assert!(!mail.subject.is_empty() && mail.subject.contains("Nubo"), "{template:?} {language:?}");
                for part in [&mail.subject, &mail.text, &mail.html] {
                    assert!(!part.contains("{{"), "{template:?} {language:?} left a placeholder: {part}");
                }
                if template != Template::Test {
                    assert!(mail.text.contains("https://x/y") && mail.html.contains("href=\"https://x/y\""));
                }
            }
        }
    }

    #[test]
    fn the_html_part_escapes_values_and_the_text_part_keeps_them() {
        let mail = render(
            Template::MagicLink,
            Language::En,
            &[("site_name", "<b>Evil & Co</b>"), ("link", "https://x/?a=1&b=2")],
        );
        assert!(mail.html.contains("&lt;b&gt;Evil &amp; Co&lt;/b&gt;") && !mail.html.contains("<b>Evil"));
        assert!(mail.html.contains("https://x/?a=1&amp;b=2"));
        assert!(mail.text.contains("<b>Evil & Co</b>") && mail.subject.contains("<b>Evil & Co</b>"));
        assert_eq!(fill("{{a}} {{b}} {{c", &[("a", "{{b}}"), ("b", "2")], str::to_owned), "{{b}} 2 {{c");
    }

    #[test]
    fn chinese_users_get_chinese_mail() {
        assert_eq!(Language::for_tag("zh-CN"), Language::ZhCn);
        assert_eq!(Language::for_tag("zh"), Language::ZhCn);
        assert_eq!(Language::for_tag("en-US"), Language::En);
        assert_eq!(Language::for_tag("fr"), Language::En);
    }

    #[test]
    fn a_mailer_needs_a_host_and_a_sender() {
        let mut settings = MailSettings {
            host: String::new(),
            port: 25,
            tls: TlsMode::None,
            user: String::new(),
            password: String::new(),
            from: "Nubo <nubo@example.com>".into(),
        };
        assert_eq!(Mailer::new(&settings).err().unwrap().code, codes::MAIL_NOT_CONFIGURED);
        settings.host = "localhost".into();
        settings.from = "not an address".into();
        assert_eq!(Mailer::new(&settings).err().unwrap().code, codes::MAIL_NOT_CONFIGURED);
    }
}
