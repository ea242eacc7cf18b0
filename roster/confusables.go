package roster

// confusables maps characters to the Latin letter or digit they are
// mistaken for: the Latin, Cyrillic and Greek entries of Unicode's
// confusables.txt (TR39) for letters that look like Latin ones, upper and
// lower case, plus 0 → o, 1 and I → l. It is applied after NFKD, so
// accented letters are covered by their base letter, and fullwidth and
// other compatibility forms are already plain letters. It is not the
// whole TR39 table: look-alikes between other scripts (or from them to
// Latin) are not listed.
var confusables = map[rune]rune{
	// Digits and Latin.
	'0': 'o', '1': 'l', 'I': 'l', '|': 'l', 'ı': 'i', 'ɑ': 'a', 'ɡ': 'g', 'ǀ': 'l', 'ʟ': 'l',
	'ɩ': 'i', 'ꞵ': 'b', 'ꭓ': 'x', 'ɪ': 'i',
	// Cyrillic.
	'а': 'a', 'в': 'b', 'е': 'e', 'і': 'i', 'ј': 'j', 'к': 'k', 'о': 'o', 'р': 'p',
	'с': 'c', 'ѕ': 's', 'у': 'y', 'х': 'x', 'һ': 'h', 'ԁ': 'd', 'ԛ': 'q', 'ԝ': 'w', 'ӏ': 'l', 'ү': 'y',
	'ь': 'b', 'ѵ': 'v', 'ԍ': 'g', 'ԃ': 'd', 'ᴦ': 'r',
	'А': 'A', 'В': 'B', 'Е': 'E', 'І': 'l', 'Ј': 'J', 'К': 'K', 'М': 'M', 'Н': 'H',
	'О': 'O', 'Р': 'P', 'С': 'C', 'Ѕ': 'S', 'Т': 'T', 'У': 'Y', 'Х': 'X', 'Ү': 'Y', 'Ӏ': 'l', 'Ԛ': 'Q',
	'Ԝ': 'W', 'Ѵ': 'V', 'Ԍ': 'G', 'Ь': 'b',
	// Greek.
	'α': 'a', 'ο': 'o', 'ν': 'v', 'ρ': 'p', 'ι': 'i', 'κ': 'k', 'υ': 'u', 'χ': 'x', 'γ': 'y', 'ϲ': 'c',
	'ϳ': 'j', 'ϱ': 'p',
	'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'l', 'Κ': 'K', 'Μ': 'M', 'Ν': 'N', 'Ο': 'O',
	'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y', 'Χ': 'X', 'Ϲ': 'C', 'Ϳ': 'J',
}
